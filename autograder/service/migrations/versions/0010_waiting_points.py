"""score history and the LTI outbox: the written answers' points that still waited for a person when a score
changed (waiting_points), beside the maximum it was out of (max_points, the assignment's whole maximum from now on)

The rows recorded before this revision keep their maximum as it was then (the graded part's) and no waiting points:
the outbox reads those as it did (a maximum below the assignment's: written answers waited).

Revision ID: 0010
Revises: 0009
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("score_changes", schema=None) as batch_op:
        batch_op.add_column(sa.Column("waiting_points", sa.Float(), nullable=True))
    with op.batch_alter_table("lti_scores", schema=None) as batch_op:
        batch_op.add_column(sa.Column("waiting_points", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("lti_scores", schema=None) as batch_op:
        batch_op.drop_column("waiting_points")
    with op.batch_alter_table("score_changes", schema=None) as batch_op:
        batch_op.drop_column("waiting_points")
