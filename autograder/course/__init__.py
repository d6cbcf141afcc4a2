"""A course as the kit reads it: course.yml and what it declares, and the notebooks it hands out.

:mod:`~autograder.course.config` reads and validates course.yml (:mod:`~autograder.course.config_errors` says
its problems in words, :mod:`~autograder.course.service_policy` declares its ``service`` section) and
:mod:`~autograder.course.files` finds it and names an assignment's files; :mod:`~autograder.course.clock`,
:mod:`~autograder.course.late_policy`, :mod:`~autograder.course.extensions` and
:mod:`~autograder.course.lateness` hold its dates, late policies and extensions;
:mod:`~autograder.course.roster` its students; :mod:`~autograder.course.written` its written questions and an
assignment's maximum; :mod:`~autograder.course.notebook` reads a submitted notebook (bounded, nothing executed)
and turns its cells into plain Python. Everything here is the grader's side: it never runs next to student code
(that is :mod:`autograder.inside`), and it imports only :mod:`autograder.core`.
"""
