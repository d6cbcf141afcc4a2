"""Alembic's environment: the connection comes from :func:`autograder.service.db.upgrade`."""
from __future__ import annotations

from alembic import context

from autograder.service.db import Base

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
