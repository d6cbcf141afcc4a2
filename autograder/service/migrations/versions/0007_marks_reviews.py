"""hand grading: marks of written answers (rubric, comment, version), adjustments of automatic scores (with a
reason), and review requests (a student's message, the staff's answer)

Revision ID: 0007
Revises: 0006
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "marks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("question", sa.String(length=20), nullable=False),
        sa.Column("answer_sha", sa.String(length=64), nullable=False),
        sa.Column("points", sa.Float(), nullable=False),
        sa.Column("rubric", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("graded_by", sa.String(length=200), nullable=False),
        sa.Column("graded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("student", "assignment", "question", "answer_sha", name="uq_marks_answer"),
    )
    with op.batch_alter_table("marks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_marks_student"), ["student"], unique=False)
    op.create_table(
        "adjustments",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("exercise", sa.String(length=20), nullable=False),
        sa.Column("points", sa.Float(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("who", sa.String(length=200), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("student", "assignment", "sha256", "exercise", name="uq_adjustments_exercise"),
    )
    with op.batch_alter_table("adjustments", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_adjustments_student"), ["student"], unique=False)
    op.create_table(
        "reviews",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("item", sa.String(length=20), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("old_points", sa.Float(), nullable=True),
        sa.Column("new_points", sa.Float(), nullable=True),
        sa.Column("answered_by", sa.String(length=200), nullable=True),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("reviews", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reviews_student"), ["student"], unique=False)
        batch_op.create_index(batch_op.f("ix_reviews_state"), ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("reviews", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reviews_state"))
        batch_op.drop_index(batch_op.f("ix_reviews_student"))
    op.drop_table("reviews")
    with op.batch_alter_table("adjustments", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_adjustments_student"))
    op.drop_table("adjustments")
    with op.batch_alter_table("marks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_marks_student"))
    op.drop_table("marks")
