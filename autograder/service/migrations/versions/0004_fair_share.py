"""fair share: each job knows its student, its round (0 for an upload, more for a regrade), when it was
claimed and until when its student is charged for the worker time it took

Revision ID: 0004
Revises: 0003
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("student", sa.String(length=200), server_default="", nullable=False))
        batch_op.add_column(sa.Column("round", sa.Integer(), server_default="0", nullable=False))
        batch_op.add_column(sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("charged_until", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_jobs_student"), ["student"], unique=False)
    # The jobs of an older database learn their student from their submission.
    op.execute("UPDATE jobs SET student = (SELECT submissions.student FROM submissions "
               "WHERE submissions.id = jobs.submission_id)")


def downgrade() -> None:
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_jobs_student"))
        batch_op.drop_column("charged_until")
        batch_op.drop_column("claimed_at")
        batch_op.drop_column("round")
        batch_op.drop_column("student")
