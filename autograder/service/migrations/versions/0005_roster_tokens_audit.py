"""the roster in the database (people), tokens with a role for TAs, an expiry and a revocation, sessions bound
to their token, and the staff's actions recorded (actions)

Revision ID: 0005
Revises: 0004
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "people",
        sa.Column("student", sa.String(length=200), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=200), nullable=False),
        sa.Column("section", sa.String(length=100), nullable=False),
        sa.Column("canvas_id", sa.String(length=100), nullable=False),
        sa.Column("moodle_id_number", sa.String(length=100), nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("student"),
    )
    op.create_table(
        "actions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("who", sa.String(length=200), nullable=False),
        sa.Column("action", sa.String(length=40), nullable=False),
        sa.Column("target", sa.String(length=200), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_actions_at"), ["at"], unique=False)
        batch_op.create_index(batch_op.f("ix_actions_target"), ["target"], unique=False)
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.add_column(sa.Column("issued_by", sa.String(length=200), server_default="", nullable=False))
        batch_op.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("revoked_by", sa.String(length=200), nullable=True))
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.add_column(sa.Column("token_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_web_sessions_token_id"), ["token_id"], unique=False)
    # The students an older database issued tokens to are its roster.
    op.execute("INSERT INTO people (student, name, email, section, canvas_id, moodle_id_number, added_at, updated_at) "
               "SELECT who, MAX(name), '', '', '', '', MIN(created_at), MIN(created_at) FROM tokens "
               "WHERE role = 'student' GROUP BY who")


def downgrade() -> None:
    with op.batch_alter_table("web_sessions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_web_sessions_token_id"))
        batch_op.drop_column("token_id")
    with op.batch_alter_table("tokens", schema=None) as batch_op:
        batch_op.drop_column("revoked_by")
        batch_op.drop_column("revoked_at")
        batch_op.drop_column("expires_at")
        batch_op.drop_column("issued_by")
    with op.batch_alter_table("actions", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_actions_target"))
        batch_op.drop_index(batch_op.f("ix_actions_at"))
    op.drop_table("actions")
    op.drop_table("people")
