"""The LMS's tables (LTI 1.3, :mod:`autograder.service.lti`), on the same base as the others.

The platforms registered, the LMS courses the tool was launched in (and bound to), their members, each assignment's
line item, the nonces of the launches accepted and the passback's outbox of scores. They share
:class:`autograder.service.tables.Base` (one schema, one set of migrations: a change here is a new migration in
autograder/service/migrations). It trusts what :mod:`autograder.service.lti` writes into it: a launch's claims are
checked there before any row is stored.
"""
from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from autograder.service.tables import Base, UTCDateTime, utcnow


class LtiPlatform(Base):
    """An LMS registered as an LTI 1.3 platform (``autograder serve lti register``): who signs its launches
    (issuer, client id, deployments, its JWKS) and where its OAuth2 token endpoint is (``autograder.service.lti``).
    ``changes_seen``: the last score change the passback has turned into outbox rows."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id", name="uq_lti_platforms_client"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issuer: Mapped[str] = mapped_column(String(300))
    client_id: Mapped[str] = mapped_column(String(200))
    deployments: Mapped[list[str]] = mapped_column(JSON)
    auth_url: Mapped[str] = mapped_column(String(500))
    token_url: Mapped[str] = mapped_column(String(500))
    jwks_url: Mapped[str] = mapped_column(String(500))
    token_audience: Mapped[str] = mapped_column(String(500), default="", server_default="")
    #: A student who launches and is not on the roster is added to it (else refused).
    enrol: Mapped[bool] = mapped_column(Boolean, default=False)
    changes_seen: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    added_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiContext(Base):
    """A course of the LMS the tool was launched in: its Assignment and Grade Services' line items URL and
    scopes, its Names and Role Provisioning Services' members URL (from the launches' claims)."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id", name="uq_lti_contexts_context"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    context_id: Mapped[str] = mapped_column(String(300))
    deployment_id: Mapped[str] = mapped_column(String(300))
    title: Mapped[str] = mapped_column(String(300), default="")
    lineitems_url: Mapped[str] = mapped_column(String(500), default="")
    scopes: Mapped[list[str]] = mapped_column(JSON)
    memberships_url: Mapped[str] = mapped_column(String(500), default="")
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    #: The service serves this LMS course (its instructor bound it: ``serve lti register --course``, ``serve lti bind``
    #: or the dashboard); a launch from a course not bound is refused and the course listed as asking.
    bound: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    bound_by: Mapped[str] = mapped_column(String(200), default="", server_default="")
    bound_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)


class LtiUser(Base):
    """A member of an LMS course (a launch, or the course's member list): the platform's user id (``sub``), the
    student it is on the roster (or the staff member's name), and the role the LMS gives."""

    __tablename__ = "lti_users"
    __table_args__ = (UniqueConstraint("context_id", "sub", name="uq_lti_users_member"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id"))
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id"))
    sub: Mapped[str] = mapped_column(String(300))
    who: Mapped[str] = mapped_column(String(200), index=True)
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(200), default="")
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)


class LtiLineItem(Base):
    """The one line item (gradebook column) of an assignment in an LMS course."""

    __tablename__ = "lti_line_items"
    __table_args__ = (UniqueConstraint("context_id", "assignment", name="uq_lti_line_items_assignment"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    context_id: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id"))
    assignment: Mapped[str] = mapped_column(String(100))
    url: Mapped[str] = mapped_column(String(500))


class LtiNonce(Base):
    """The nonce of every launch accepted, until its token expires: a token sent again is refused."""

    __tablename__ = "lti_nonces"

    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), index=True)


class LtiScore(Base):
    """The passback's outbox: one counted score to send to one member's line item, in the order of the score
    changes; pending until the platform took it (sent), or found equal to the last one sent (same); retried with
    backoff meanwhile."""

    __tablename__ = "lti_scores"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    member_id: Mapped[int] = mapped_column(ForeignKey("lti_users.id"), index=True)
    assignment: Mapped[str] = mapped_column(String(100))
    change_id: Mapped[int] = mapped_column(Integer)
    points: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_points: Mapped[float | None] = mapped_column(Float, nullable=True)
    waiting_points: Mapped[float | None] = mapped_column(Float, nullable=True)     # (as its score change's)
    changed_at: Mapped[dt.datetime] = mapped_column(UTCDateTime())
    state: Mapped[str] = mapped_column(String(8), default="pending", index=True)    # pending | sent | same
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_try_at: Mapped[dt.datetime] = mapped_column(UTCDateTime(), default=utcnow)
    error: Mapped[str] = mapped_column(Text, default="")
    sent_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime(), nullable=True)
