"""The service's routes, one router per resource: the API's submissions, signing in, the student's page, the
instructor's dashboard and its downloads, the roster, hand grading (the answers one by one, the unanswered ones given
0, an instructor's decision between two marks, an exercise's points adjusted), reviews, analytics and LTI 1.3 (the
Hub's sign-in is :meth:`autograder.service.hub.Hub.router`). A router holds no SQL: its queries are in
:mod:`autograder.service.repository` or the module that owns the table (tests/service/test_repository.py)."""
