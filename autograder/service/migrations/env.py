"""Alembic's environment: the connection comes from :func:`autograder.service.db.upgrade`."""
from __future__ import annotations

from alembic import context

from autograder.service import lti_tables  # noqa: F401 - its tables in Base.metadata, beside tables.py's
from autograder.service.tables import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
