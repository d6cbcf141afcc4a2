"""The service's routes, one router per resource: the API's submissions, signing in, the student's page, the
instructor's dashboard and its downloads, the roster, hand grading, reviews, analytics and LTI 1.3 (the Hub's
sign-in is :meth:`autograder.service.hub.Hub.router`). A router holds no SQL: its queries are in
:mod:`autograder.service.repository` or the module that owns the table (tests/test_routers_hold_no_sql.py)."""
