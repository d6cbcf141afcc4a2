"""LTI: the LMS courses the service is bound to (a launch from any other is refused), and the LMS membership a page
session was opened with (its grant: the session ends with it)

The LMS courses recorded before this revision are not bound: each waits on the staff's LTI page for its instructor
to bind it (a course launched into before could be another teacher's course of the same Moodle site or Canvas
account). Their scores wait in the outbox meanwhile; none is lost.

Revision ID: 0009
Revises: 0008
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("bound", sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.add_column(sa.Column("bound_by", sa.String(length=200), server_default="", nullable=False))
        batch_op.add_column(sa.Column("bound_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("lti_member_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_web_sessions_lti_member_id"), ["lti_member_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_lti_member_id"))
        batch_op.drop_column("lti_member_id")
    with op.batch_alter_table("lti_contexts", schema=None) as batch_op:
        batch_op.drop_column("bound_at")
        batch_op.drop_column("bound_by")
        batch_op.drop_column("bound")
