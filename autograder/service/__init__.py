"""The grading service (issue 28): submissions stored before they are acknowledged, a queue in the
database, grading in worker processes of their own.

* :mod:`~autograder.service.tables` and :mod:`~autograder.service.lti_tables`: the tables (SQLAlchemy 2);
  :mod:`~autograder.service.db`: the engine (SQLite in WAL mode by default, PostgreSQL through psycopg 3),
  migrated by Alembic (:mod:`autograder.service.migrations`).
* :mod:`~autograder.service.queue`: the job queue as a table, no broker: a job is claimed with a
  lease, and claimed again when the worker that held it died and the lease ran out.
* :mod:`~autograder.service.worker`: a worker process, ``autograder worker --database URL``: claims,
  grades in the sandbox exactly as ``autograder grade`` does, and records one result per submission.
"""
