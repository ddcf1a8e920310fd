"""The LTI tables (created by migration ``0003_lti``).

    lti_keys        the tool's own RSA signing keys; the newest active one signs, all unretired are published
    lti_logins      one row per OIDC login initiation: state -> nonce, used once by the launch
    lti_nonces      id_token nonces already seen (a replayed launch is refused)
    lti_contexts    an LMS context (issuer, deployment, context id) -> a course, with its service URLs
    lti_links       an LMS resource link -> an assignment, with its AGS line item
    lti_users       an LMS user (issuer, sub) in a course -> a student, or an instructor (a staff account
                    once they have signed in with its token from a launch: LMS roles alone grant nothing)
    lti_passbacks   one score to send per (grading or override, line item): pending, held, sent, failed or
                    superseded (not the score that counts: an older submission's, or replaced before sending)
    lti_events      rejected launches and passback failures, for staff
    lti_platforms   LMS registrations made by LTI dynamic registration (``lti.toml`` holds the others)
    lti_invitations dynamic registration invitations already opened: each is good for one attempt
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import CheckConstraint, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from .tables import Base, UTCDateTime, utcnow

PASSBACK_STATES = ("pending", "held", "sent", "failed", "superseded")


class LtiKey(Base):
    __tablename__ = "lti_keys"

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    private_pem: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # no longer published


class LtiLogin(Base):
    __tablename__ = "lti_logins"

    state: Mapped[str] = mapped_column(String(64), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(64))
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class LtiNonce(Base):
    __tablename__ = "lti_nonces"

    issuer: Mapped[str] = mapped_column(String(255), primary_key=True)
    nonce: Mapped[str] = mapped_column(String(255), primary_key=True)
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)


class LtiContext(Base):
    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("issuer", "deployment_id", "context_id", name="lti_contexts_once"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    deployment_id: Mapped[str] = mapped_column(String(255))
    context_id: Mapped[str] = mapped_column(String(255))
    course_id: Mapped[int] = mapped_column(ForeignKey("courses.id", ondelete="CASCADE"), index=True)
    memberships_url: Mapped[str] = mapped_column(Text, default="")
    lineitems_url: Mapped[str] = mapped_column(Text, default="")


class LtiLink(Base):
    __tablename__ = "lti_links"
    __table_args__ = (UniqueConstraint("context_pk", "resource_link_id", name="lti_links_once"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    context_pk: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True)
    resource_link_id: Mapped[str] = mapped_column(String(255))
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id", ondelete="CASCADE"), index=True)
    lineitem_url: Mapped[str] = mapped_column(Text, default="")  # empty: created at the first passback


class LtiUser(Base):
    __tablename__ = "lti_users"
    __table_args__ = (UniqueConstraint("context_pk", "sub", name="lti_users_once"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    context_pk: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"), index=True)
    sub: Mapped[str] = mapped_column(String(255))
    role: Mapped[str] = mapped_column(String(16))  # student | instructor
    student_pk: Mapped[int | None] = mapped_column(ForeignKey("students.id", ondelete="CASCADE"), index=True)
    staff_pk: Mapped[int | None] = mapped_column(ForeignKey("staff.id", ondelete="SET NULL"), index=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    email: Mapped[str] = mapped_column(String(320), default="")


class LtiPassback(Base):
    __tablename__ = "lti_passbacks"
    __table_args__ = (
        UniqueConstraint("grading_id", "link_pk", "user_pk", name="lti_passbacks_once"),
        UniqueConstraint("override_id", "link_pk", "user_pk", name="lti_passbacks_override_once"),
        CheckConstraint("state IN ('pending', 'held', 'sent', 'failed', 'superseded')", name="lti_passbacks_state"),
        CheckConstraint("(grading_id IS NULL) <> (override_id IS NULL)", name="lti_passbacks_one_source"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # the score's source: a grading, or a staff override
    grading_id: Mapped[int | None] = mapped_column(ForeignKey("gradings.id", ondelete="CASCADE"), index=True)
    override_id: Mapped[int | None] = mapped_column(ForeignKey("overrides.id", ondelete="CASCADE"), index=True)
    link_pk: Mapped[int] = mapped_column(ForeignKey("lti_links.id", ondelete="CASCADE"), index=True)
    user_pk: Mapped[int] = mapped_column(ForeignKey("lti_users.id", ondelete="CASCADE"), index=True)
    state: Mapped[str] = mapped_column(String(16), default="pending", index=True)
    score_given: Mapped[float | None] = mapped_column()
    score_maximum: Mapped[float | None] = mapped_column()
    timestamp: Mapped[datetime] = mapped_column(UTCDateTime)  # sent as the score's timestamp; grows per user
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    last_error: Mapped[str] = mapped_column(Text, default="")
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class LtiEvent(Base):
    __tablename__ = "lti_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    kind: Mapped[str] = mapped_column(String(32))  # launch_rejected | passback_failed | ...
    issuer: Mapped[str] = mapped_column(String(255), default="")
    detail: Mapped[str] = mapped_column(Text, default="")


class LtiPlatform(Base):
    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id", name="lti_platforms_once"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    registration_id: Mapped[str] = mapped_column(String(64), unique=True)  # the staff invitation it used (once)
    issuer: Mapped[str] = mapped_column(String(255))
    client_id: Mapped[str] = mapped_column(String(255))
    deployment_ids_json: Mapped[str] = mapped_column(Text)
    auth_login_url: Mapped[str] = mapped_column(Text)
    auth_token_url: Mapped[str] = mapped_column(Text)
    jwks_url: Mapped[str] = mapped_column(Text)
    product: Mapped[str] = mapped_column(String(200), default="")  # the LMS's product family code
    registered_by: Mapped[str] = mapped_column(String(64))  # the staff member who made the invitation
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class LtiInvitation(Base):
    """A registration invitation that was used (its first attempt, whether it registered or not)."""

    __tablename__ = "lti_invitations"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)  # the invitation's random id
    used_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    made_by: Mapped[str] = mapped_column(String(64), default="")  # the staff member who made it
