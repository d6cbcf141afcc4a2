"""score history: every change of a counted score, with old and new, why, who and when (score_changes)

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "score_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("old_points", sa.Float(), nullable=True),
        sa.Column("new_points", sa.Float(), nullable=True),
        sa.Column("max_points", sa.Float(), nullable=True),
        sa.Column("why", sa.String(length=20), nullable=False),
        sa.Column("who", sa.String(length=200), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("score_changes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_score_changes_student"), ["student"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("score_changes", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_score_changes_student"))
    op.drop_table("score_changes")
