"""Deep linking: an instructor, signed in as staff, picks a grader assignment; the tool answers the
LMS with a signed ``LtiDeepLinkingResponse`` holding one LTI resource link (with its signed
``grader_link`` custom parameter and a line item), and links the LMS course to the grader course."""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from typing import Any

import jwt
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...errors import LaunchRejected
from ...results.lti_tables import LtiContext, LtiUser
from ...results.tables import Assignment, Course
from ..ops import rubric_of
from .config import LtiConfig
from .keys import signing_key
from .launch import CLAIM, DL_CLAIM
from .links import LINK_PARAM, link_value
from .registration import find_platform


@dataclass(frozen=True)
class Choice:
    value: str  # "<course>/<assignment>", the form's value
    course: str
    assignment: str
    title: str


def choices(session: Session, request: dict[str, Any]) -> list[Choice]:
    """The assignments this LMS course may link: its grader course's, or every course's if it has none yet."""
    query = select(Assignment, Course).join(Course, Course.id == Assignment.course_id).order_by(Course.slug,
                                                                                                Assignment.slug)
    linked = _context(session, request)
    if linked is not None:
        query = query.where(Course.id == linked.course_id)
    return [Choice(f"{c.slug}/{a.slug}", c.slug, a.slug, a.title or a.slug) for a, c in session.execute(query)]


def _context(session: Session, request: dict[str, Any]) -> LtiContext | None:
    return session.scalar(select(LtiContext).where(LtiContext.issuer == request["iss"],
                                                   LtiContext.deployment_id == request["deployment_id"],
                                                   LtiContext.context_id == request["context_id"]))


def answer(session: Session, config: LtiConfig, secret: bytes, request: dict[str, Any], picked: str,
           staff_pk: int) -> str:
    """The signed deep-linking response for the picked ``course/assignment``; links the LMS course
    to that grader course (and the instructor to their staff account) on the way."""
    platform = find_platform(session, config, request["iss"], request["client_id"])
    if platform is None:
        raise LaunchRejected(f"the platform {request['iss']!r} is no longer registered")
    found = {c.value: c for c in choices(session, request)}.get(picked)
    if found is None:
        raise LaunchRejected(f"{picked!r} is not an assignment this LMS course can link")
    course = session.scalars(select(Course).where(Course.slug == found.course)).one()
    assignment = session.scalars(select(Assignment).where(Assignment.course_id == course.id,
                                                          Assignment.slug == found.assignment)).one()
    if request["context_id"]:
        ctx = _context(session, request)
        if ctx is None:
            ctx = LtiContext(issuer=platform.issuer, client_id=platform.client_id,
                             deployment_id=request["deployment_id"], context_id=request["context_id"],
                             course_id=course.id, memberships_url="", lineitems_url="")
            session.add(ctx)
            session.flush()
        user = session.scalar(select(LtiUser).where(LtiUser.context_pk == ctx.id, LtiUser.sub == request["sub"]))
        if user is None:
            user = LtiUser(context_pk=ctx.id, sub=request["sub"], role="instructor", name=request.get("name") or "",
                           email=request.get("email") or "")
            session.add(user)
        user.staff_pk = staff_pk
        session.flush()
    title = assignment.title or assignment.slug
    item = {"type": "ltiResourceLink", "title": title, "url": config.launch_url,
            "custom": {LINK_PARAM: link_value(secret, course.slug, assignment.slug)},
            "lineItem": {"scoreMaximum": rubric_of(assignment).max_score, "label": title,
                         "resourceId": f"{course.slug}/{assignment.slug}", "tag": "grade"},
            "window": {"targetName": "_blank"}}
    now = int(time.time())
    claims: dict[str, Any] = {
        "iss": platform.client_id, "aud": [platform.issuer], "iat": now, "exp": now + 600,
        "nonce": secrets.token_urlsafe(16), CLAIM + "message_type": "LtiDeepLinkingResponse",
        CLAIM + "version": "1.3.0", CLAIM + "deployment_id": request["deployment_id"],
        DL_CLAIM + "content_items": [item]}
    if request.get("data") is not None:
        claims[DL_CLAIM + "data"] = request["data"]
    key = signing_key(session)
    return jwt.encode(claims, key.private_pem, algorithm="RS256", headers={"kid": key.kid})
