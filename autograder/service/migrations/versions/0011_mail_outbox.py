"""the mail outbox: e-mail to students (a verdict, a hand grade, a review answer), queued in the transaction of what
it tells of and sent by autograder serve's mail loop (autograder.service.mail)

Revision ID: 0011
Revises: 0010
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "mail_outbox",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("item", sa.String(length=40), nullable=False),
        sa.Column("ref", sa.Integer(), nullable=True),
        sa.Column("state", sa.String(length=12), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("held_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("mail_outbox", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_mail_outbox_state"), ["state"], unique=False)
        batch_op.create_index(batch_op.f("ix_mail_outbox_student"), ["student"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("mail_outbox", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_mail_outbox_student"))
        batch_op.drop_index(batch_op.f("ix_mail_outbox_state"))
    op.drop_table("mail_outbox")
