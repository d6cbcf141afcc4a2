"""double marking: the two blind marks of a written answer of a double-marked question (course.yml's
service.double_marking), each by a different person; the mark that counts stays in marks

Revision ID: 0012
Revises: 0011
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "double_marks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("question", sa.String(length=20), nullable=False),
        sa.Column("answer_sha", sa.String(length=64), nullable=False),
        sa.Column("marker", sa.Integer(), nullable=False),
        sa.Column("points", sa.Float(), nullable=False),
        sa.Column("rubric", sa.JSON(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=False),
        sa.Column("graded_by", sa.String(length=200), nullable=False),
        sa.Column("graded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("student", "assignment", "question", "answer_sha", "marker",
                            name="uq_double_marks_answer"),
    )
    with op.batch_alter_table("double_marks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_double_marks_student"), ["student"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("double_marks", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_double_marks_student"))
    op.drop_table("double_marks")
