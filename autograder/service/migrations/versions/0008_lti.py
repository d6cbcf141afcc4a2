"""LTI 1.3: the platforms registered, the LMS courses and their members, each assignment's line item, the nonces of
the launches accepted, and the passback's outbox of scores

Revision ID: 0008
Revises: 0007
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lti_platforms",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("issuer", sa.String(length=300), nullable=False),
        sa.Column("client_id", sa.String(length=200), nullable=False),
        sa.Column("deployments", sa.JSON(), nullable=False),
        sa.Column("auth_url", sa.String(length=500), nullable=False),
        sa.Column("token_url", sa.String(length=500), nullable=False),
        sa.Column("jwks_url", sa.String(length=500), nullable=False),
        sa.Column("token_audience", sa.String(length=500), server_default="", nullable=False),
        sa.Column("enrol", sa.Boolean(), nullable=False),
        sa.Column("changes_seen", sa.Integer(), server_default="0", nullable=False),
        sa.Column("added_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_client"),
    )
    op.create_table(
        "lti_contexts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.String(length=300), nullable=False),
        sa.Column("deployment_id", sa.String(length=300), nullable=False),
        sa.Column("title", sa.String(length=300), nullable=False),
        sa.Column("lineitems_url", sa.String(length=500), nullable=False),
        sa.Column("scopes", sa.JSON(), nullable=False),
        sa.Column("memberships_url", sa.String(length=500), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["platform_id"], ["lti_platforms.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("platform_id", "context_id", name="uq_lti_contexts_context"),
    )
    op.create_table(
        "lti_users",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("platform_id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("sub", sa.String(length=300), nullable=False),
        sa.Column("who", sa.String(length=200), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("email", sa.String(length=200), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["context_id"], ["lti_contexts.id"]),
        sa.ForeignKeyConstraint(["platform_id"], ["lti_platforms.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("context_id", "sub", name="uq_lti_users_member"),
    )
    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_users_who"), ["who"], unique=False)
    op.create_table(
        "lti_line_items",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("context_id", sa.Integer(), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("url", sa.String(length=500), nullable=False),
        sa.ForeignKeyConstraint(["context_id"], ["lti_contexts.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("context_id", "assignment", name="uq_lti_line_items_assignment"),
    )
    op.create_table(
        "lti_nonces",
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("digest"),
    )
    with op.batch_alter_table("lti_nonces", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_nonces_expires_at"), ["expires_at"], unique=False)
    op.create_table(
        "lti_scores",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("member_id", sa.Integer(), nullable=False),
        sa.Column("assignment", sa.String(length=100), nullable=False),
        sa.Column("change_id", sa.Integer(), nullable=False),
        sa.Column("points", sa.Float(), nullable=True),
        sa.Column("max_points", sa.Float(), nullable=True),
        sa.Column("changed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("state", sa.String(length=8), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_try_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["member_id"], ["lti_users.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("lti_scores", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_lti_scores_member_id"), ["member_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_lti_scores_state"), ["state"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("lti_scores", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_scores_state"))
        batch_op.drop_index(batch_op.f("ix_lti_scores_member_id"))
    op.drop_table("lti_scores")
    with op.batch_alter_table("lti_nonces", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_nonces_expires_at"))
    op.drop_table("lti_nonces")
    op.drop_table("lti_line_items")
    with op.batch_alter_table("lti_users", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_lti_users_who"))
    op.drop_table("lti_users")
    op.drop_table("lti_contexts")
    op.drop_table("lti_platforms")
