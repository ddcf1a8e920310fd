"""OIDC third-party login initiation and the LTI 1.3 launch: the platform's id_token is verified
against its JWKS (PyJWT's cached JWKS client refetches on an unknown key id: key rotation), and
state, nonce (single use), audience, authorized party, expiry, issuer, deployment id, message
type and version are checked. A resource-link launch then maps the LMS user and context to the
grader's: the link's signed ``grader_link`` custom parameter names the course and assignment the
first time; a learner becomes (or is matched to) a student. A deep-linking launch is an
instructor placing the tool in an LMS course; ``deep_link_request`` keeps what its answer needs."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode

import jwt
from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ...errors import LaunchRejected, NeedsStaff
from ...results.lti_tables import LtiContext, LtiEvent, LtiLink, LtiLogin, LtiNonce, LtiUser
from ...results.tables import Assignment, Course, Student, utcnow
from ..ops import new_token, token_hash
from .checks import shown, web_url
from .config import LtiConfig, Platform
from .links import LINK_PARAM, read_link
from .network import Network, guarded_client
from .registration import find_platform, get_json

log = logging.getLogger("grader.service.lti")
CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
AGS_CLAIM = "https://purl.imsglobal.org/spec/lti-ags/claim/endpoint"
NRPS_CLAIM = "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice"
DL_CLAIM = "https://purl.imsglobal.org/spec/lti-dl/claim/"
MEMBERSHIP = "http://purl.imsglobal.org/vocab/lis/v2/membership"  # roles in the course (context)
STAFF_ROLES = ("Instructor", "Administrator", "ContentDeveloper", "TeachingAssistant")
RESOURCE_LINK, DEEP_LINKING = "LtiResourceLinkRequest", "LtiDeepLinkingRequest"
LOGIN_TTL = timedelta(minutes=10)
NONCE_KEPT = timedelta(days=1)
LEEWAY_S = 30
JWKS_REFETCH_COOLDOWN_S = 2.0
STUDENT_ID_CHARS = 128  # students.student_id
MAX_DETAIL = 2000  # of an event kept for staff


@dataclass(frozen=True)
class Launch:
    role: str  # student | instructor
    user: str  # the student id, or the instructor's name
    course: str
    assignment: str
    user_pk: int
    student_pk: int | None  # the student signed in, for a learner
    staff_pk: int | None  # the staff account an instructor linked before, if any


# ---- login initiation --------------------------------------------------------------------------


def login_redirect(session: Session, config: LtiConfig, params: dict[str, str]) -> tuple[str, str]:
    """The platform's authorization URL to redirect to, and the state (also set as a cookie)."""
    issuer, hint = params.get("iss", ""), params.get("login_hint", "")
    platform = find_platform(session, config, issuer, params.get("client_id") or None)
    if platform is None:
        raise LaunchRejected(f"no platform is registered with issuer {shown(issuer)}"
                             + (f" and client id {shown(params['client_id'])}" if params.get("client_id") else ""))
    if not hint:
        raise LaunchRejected("the login request has no login_hint")
    state, nonce = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    session.execute(delete(LtiLogin).where(LtiLogin.created_at < utcnow() - LOGIN_TTL))
    # A launch needs an unused login whose nonce its token carries, so a nonce cannot be replayed
    # once its login is gone; a day of them is kept for staff to see.
    session.execute(delete(LtiNonce).where(LtiNonce.seen_at < utcnow() - NONCE_KEPT))
    session.add(LtiLogin(state=state, nonce=nonce, issuer=issuer, client_id=platform.client_id))
    query = {"scope": "openid", "response_type": "id_token", "response_mode": "form_post", "prompt": "none",
             "client_id": platform.client_id, "redirect_uri": config.launch_url, "login_hint": hint,
             "state": state, "nonce": nonce}
    if params.get("lti_message_hint"):
        query["lti_message_hint"] = params["lti_message_hint"]
    sep = "&" if "?" in platform.auth_login_url else "?"
    return f"{platform.auth_login_url}{sep}{urlencode(query)}", state


# ---- the launch ----------------------------------------------------------------------------------

class GuardedJWKClient(jwt.PyJWKClient):
    """PyJWT's JWKS client, fetching through ``guarded_client``: for a platform a dynamic registration
    made, whose key set URL may only be reached at addresses lti.toml allows (network.py), and whose
    answer is read only up to registration's ``MAX_DOCUMENT``."""

    def __init__(self, uri: str, allowed: tuple[Network, ...], **kwargs: Any) -> None:
        super().__init__(uri, **kwargs)
        self.allowed = allowed

    def fetch_data(self) -> Any:
        try:
            with guarded_client(self.allowed, timeout=self.timeout) as http:
                jwk_set = get_json(http, self.uri, "key set (JWKS)", headers=self.headers)
        except LaunchRejected as e:
            raise jwt.PyJWKClientConnectionError(str(e)) from None
        if self.jwk_set_cache is not None:
            self.jwk_set_cache.put(jwk_set)
        self._last_successful_fetch = time.monotonic()  # what PyJWKClient's refetch cooldown counts from
        return jwk_set


_jwks_clients: dict[tuple[str, tuple[Network, ...] | None], jwt.PyJWKClient] = {}
_jwks_lock = threading.Lock()


def jwks_client(platform: Platform, config: LtiConfig) -> jwt.PyJWKClient:
    """One cached client per JWKS URL: keys are kept 5 minutes, and an unknown kid refetches (a
    platform's key rotation), at most once per cooldown (tokens with made-up kids cannot make the
    tool flood the platform). A registered platform's is guarded (``GuardedJWKClient``)."""
    key = (platform.jwks_url, config.allow_private_networks if platform.registered else None)
    options: dict[str, Any] = {"cache_keys": True, "lifespan": 300, "timeout": 10,
                               "cooldown_duration": JWKS_REFETCH_COOLDOWN_S}
    with _jwks_lock:
        if key not in _jwks_clients:
            _jwks_clients[key] = (GuardedJWKClient(platform.jwks_url, config.allow_private_networks, **options)
                                  if platform.registered else jwt.PyJWKClient(platform.jwks_url, **options))
        return _jwks_clients[key]


def verify_id_token(session: Session, config: LtiConfig, id_token: str, state: str, cookie_state: str | None
                    ) -> tuple[Platform, dict[str, Any]]:
    if not state or not id_token:
        raise LaunchRejected("the launch has no id_token or no state")
    if cookie_state != state:
        raise LaunchRejected("the launch's state does not match this browser's login (cookies blocked, or a "
                             "launch started elsewhere)")
    login = session.get(LtiLogin, state)
    if login is None or login.created_at < utcnow() - LOGIN_TTL:
        raise LaunchRejected("unknown or expired state: the login was already used or is older than 10 minutes")
    session.delete(login)  # single use
    try:
        unverified = jwt.decode(id_token, options={"verify_signature": False})
    except jwt.InvalidTokenError as e:
        raise LaunchRejected(f"the id_token is not a JWT ({e})") from None
    if unverified.get("iss") != login.issuer:
        raise LaunchRejected(f"wrong issuer {shown(unverified.get('iss'))}: the login was started by {login.issuer!r}")
    platform = find_platform(session, config, login.issuer, login.client_id)
    if platform is None:
        raise LaunchRejected(f"the platform {login.issuer!r} is no longer registered")
    try:
        key = jwks_client(platform, config).get_signing_key_from_jwt(id_token)
        claims: dict[str, Any] = jwt.decode(
            id_token, key.key, algorithms=["RS256"], audience=platform.client_id, issuer=platform.issuer,
            leeway=LEEWAY_S, options={"require": ["exp", "iat", "iss", "aud", "sub", "nonce"]})
    except jwt.ExpiredSignatureError:
        raise LaunchRejected("the id_token has expired") from None
    except jwt.InvalidAudienceError:
        raise LaunchRejected(f"the id_token is not for this tool (audience is not {platform.client_id!r})") from None
    except jwt.InvalidIssuerError:
        raise LaunchRejected("the id_token's issuer is not the registered platform") from None
    except jwt.InvalidSignatureError:
        raise LaunchRejected("the id_token's signature does not verify with the platform's keys") from None
    except (jwt.PyJWKClientError, jwt.InvalidTokenError) as e:
        raise LaunchRejected(f"the id_token does not verify: {e}") from None
    aud = claims["aud"]
    if isinstance(aud, list) and len(aud) > 1 and claims.get("azp") != platform.client_id:
        raise LaunchRejected("the id_token has several audiences and its azp is not this tool")
    if claims["nonce"] != login.nonce:
        raise LaunchRejected("the id_token's nonce is not the one this login sent")
    try:
        with session.begin_nested():
            session.add(LtiNonce(issuer=platform.issuer, nonce=claims["nonce"]))
    except IntegrityError:
        raise LaunchRejected("this id_token's nonce was used before (a replayed launch)") from None
    deployment = claims.get(CLAIM + "deployment_id")
    if deployment not in platform.deployment_ids:
        raise LaunchRejected(f"deployment id {shown(deployment)} is not registered for {platform.issuer!r}")
    if claims.get(CLAIM + "message_type") not in (RESOURCE_LINK, DEEP_LINKING):
        raise LaunchRejected(f"unsupported message type {shown(claims.get(CLAIM + 'message_type'))}")
    if claims.get(CLAIM + "version") != "1.3.0":
        raise LaunchRejected(f"unsupported LTI version {shown(claims.get(CLAIM + 'version'))}")
    check_shapes(claims)
    return platform, claims


# ---- the claims the tool reads, with the types LTI gives them ------------------------------------

ID, TEXT, TITLE, URL, TEXTS = "id", "text", "title", "url", "texts"
LIMITS = {ID: 255, TEXT: 200, TITLE: 1000, URL: 2048}  # the columns' sizes (a title is only shown)
SHAPES: dict[str, dict[str, str]] = {  # an object claim: its members the tool reads, and their kind
    CLAIM + "context": {"id": ID, "title": TITLE},
    CLAIM + "resource_link": {"id": ID},
    CLAIM + "custom": {LINK_PARAM: TEXT},
    CLAIM + "lis": {"person_sourcedid": TEXT},
    AGS_CLAIM: {"lineitem": URL, "lineitems": URL},
    NRPS_CLAIM: {"context_memberships_url": URL},
    DL_CLAIM + "deep_linking_settings": {"deep_link_return_url": URL, "accept_types": TEXTS},
}
TOP: dict[str, str] = {"sub": ID, "name": TEXT, "email": TEXT, CLAIM + "roles": TEXTS}


def check_shapes(claims: dict[str, Any]) -> None:
    """Refuse a token whose claims the tool reads are not of the type LTI gives them (an object, a
    string of sensible length, an http(s) URL, a list of strings): they would break the mapping."""
    for name, kind in TOP.items():
        _check(name, claims.get(name), kind)
    for name, members in SHAPES.items():
        found = claims.get(name)
        if found is None:
            continue
        if not isinstance(found, dict):
            raise LaunchRejected(f"the id_token's claim {name} is not a JSON object")
        for member, kind in members.items():
            _check(f"{name} {member}", found.get(member), kind)


def _check(name: str, value: Any, kind: str) -> None:
    if value is None:
        return
    if kind == TEXTS:
        if not isinstance(value, list) or not all(isinstance(v, str) and len(v) <= LIMITS[URL] for v in value):
            raise LaunchRejected(f"the id_token's claim {name} is not a list of strings")
        return
    if not isinstance(value, str) or len(value) > LIMITS[kind]:
        raise LaunchRejected(f"the id_token's claim {name} is not a string of at most {LIMITS[kind]} characters")
    if kind == URL and value and not web_url(value):
        raise LaunchRejected(f"the id_token's claim {name} is not an http(s) URL")


def is_staff(roles: list[str]) -> bool:
    """A staff role in this course: ``membership#Instructor`` (or Administrator, ContentDeveloper,
    TeachingAssistant), a sub-role of one (``membership/Instructor#TeachingAssistant``), or the short
    name. Institution and system roles (someone who teaches elsewhere) and sub-roles of Learner
    (``membership/Learner#Instructor``) are not."""
    for role in roles:
        base, _, name = role.partition("#")
        if (role in STAFF_ROLES or (base == MEMBERSHIP and name in STAFF_ROLES)
                or base.removeprefix(MEMBERSHIP + "/") in STAFF_ROLES):
            return True
    return False


def message_type(claims: dict[str, Any]) -> str:
    return str(claims.get(CLAIM + "message_type", ""))


UNLINKED_COURSE = ("this LMS course is not linked to the grader yet: course staff open this link from the LMS once "
                   "first (signed in to the grader), or add the assignment through the LMS's deep linking")


def map_launch(session: Session, secret: bytes, platform: Platform, claims: dict[str, Any],
               staff_pk: int | None = None) -> Launch:
    """The course, assignment and student (or instructor) of a verified resource-link launch.
    Only course staff link a new LMS course to a grader course: an instructor whose LMS account is
    linked to a staff account (or ``staff_pk``, the staff account just signed in). The signed
    ``grader_link`` alone does not: every learner reads it in their own launch's id_token."""
    context = claims.get(CLAIM + "context") or {}
    link = claims.get(CLAIM + "resource_link") or {}
    custom = claims.get(CLAIM + "custom") or {}
    if not context.get("id") or not link.get("id"):
        raise LaunchRejected("the launch has no context or resource link")
    role = "instructor" if is_staff(claims.get(CLAIM + "roles") or []) else "student"
    if role == "instructor" and staff_pk is None:
        staff_pk = staff_of(session, platform.issuer, claims["sub"])
    named = _named(secret, custom)
    try:
        ctx = context_for(session, platform, claims, named[0] if named else None, may_link=staff_pk is not None)
    except NeedsStaff:
        if role == "instructor" and named is not None:
            raise NeedsStaff(UNLINKED_COURSE, f"/staff/c/{named[0]}/{named[1]}") from None
        raise LaunchRejected(UNLINKED_COURSE) from None
    lti_link = _link(session, ctx, link["id"], named, (claims.get(AGS_CLAIM) or {}).get("lineitem", ""))
    course = session.get_one(Course, ctx.course_id)
    assignment = session.get_one(Assignment, lti_link.assignment_id)
    user = upsert_user(session, ctx, claims["sub"], role, claims.get("name", ""), claims.get("email", ""),
                       (claims.get(CLAIM + "lis") or {}).get("person_sourcedid", ""))
    display = claims.get("name") or claims["sub"]
    if user.student_pk is not None:
        display = session.get_one(Student, user.student_pk).student_id
    return Launch(role, display, course.slug, assignment.slug, user.id, user.student_pk, staff_pk)


def replayable(claims: dict[str, Any]) -> dict[str, Any]:
    """What ``map_launch`` reads of a verified launch, to map it again after a staff sign-in (kept
    in a signed cookie meanwhile, so only the members it reads)."""
    kept: dict[str, Any] = {k: claims[k] for k in ("sub", "name", "email", CLAIM + "deployment_id") if k in claims}
    kept[CLAIM + "roles"] = [r for r in claims.get(CLAIM + "roles") or [] if is_staff([r])]
    for name, members in SHAPES.items():
        if isinstance(claims.get(name), dict):
            kept[name] = {m: claims[name][m] for m in members if m in claims[name] and m != "title"}
    return kept


def _named(secret: bytes, custom: dict[str, Any]) -> tuple[str, str] | None:
    """The (course, assignment) of the link's ``grader_link`` parameter; a value we did not sign is
    refused (a typed course name could attach any LMS course to any grader course)."""
    value = custom.get(LINK_PARAM)
    if not value:
        return None
    named = read_link(secret, str(value))
    if named is None:
        raise LaunchRejected(f"the link's {LINK_PARAM} parameter is not one this grader issued: copy it again from "
                             f"the grader (staff: GET /lti/courses/<course>/assignments/<assignment>/link), or add "
                             f"the assignment through the LMS's deep linking")
    return named


def context_for(session: Session, platform: Platform, claims: dict[str, Any], course_slug: str | None,
                may_link: bool) -> LtiContext:
    """The LMS context of a launch, linked to a grader course the first time a signed link names one
    in a launch of course staff (``may_link``); ``NeedsStaff`` otherwise."""
    context_id = (claims.get(CLAIM + "context") or {}).get("id", "")
    deployment = claims[CLAIM + "deployment_id"]
    ctx = session.scalar(select(LtiContext).where(LtiContext.issuer == platform.issuer,
                                                  LtiContext.deployment_id == deployment,
                                                  LtiContext.context_id == context_id))
    course = session.scalar(select(Course).where(Course.slug == course_slug)) if course_slug else None
    if course_slug and course is None:
        raise LaunchRejected(f"the link names grader course {course_slug!r}, which does not exist (any more)")
    if ctx is None:
        if course is None:
            raise LaunchRejected(f"this LMS course is not linked to a grader course yet: add the assignment through "
                                 f"the LMS's deep linking, or give the link the custom parameter {LINK_PARAM}=<value "
                                 f"from the grader>")
        if not may_link:
            raise NeedsStaff(UNLINKED_COURSE, "")
        ctx = LtiContext(issuer=platform.issuer, client_id=platform.client_id, deployment_id=deployment,
                         context_id=context_id, course_id=course.id)
        session.add(ctx)
    elif course is not None and course.id != ctx.course_id:
        linked = session.get_one(Course, ctx.course_id).slug
        raise LaunchRejected(f"this LMS course is linked to grader course {linked!r}, but the link names "
                             f"{course_slug!r}: one LMS course grades into one grader course")
    ags = claims.get(AGS_CLAIM) or {}
    ctx.lineitems_url = ags.get("lineitems", ctx.lineitems_url or "")
    ctx.memberships_url = (claims.get(NRPS_CLAIM) or {}).get("context_memberships_url", ctx.memberships_url or "")
    session.flush()
    return ctx


def _link(session: Session, ctx: LtiContext, resource_link_id: str, named: tuple[str, str] | None,
          lineitem: str) -> LtiLink:
    found = session.scalar(select(LtiLink).where(LtiLink.context_pk == ctx.id,
                                                 LtiLink.resource_link_id == resource_link_id))
    assignment = None
    if named is not None:
        assignment = session.scalar(select(Assignment).where(Assignment.course_id == ctx.course_id,
                                                             Assignment.slug == named[1]))
        if assignment is None:
            raise LaunchRejected(f"the link names assignment {named[1]!r}, which the grader course does not have")
    if found is None:
        if assignment is None:
            raise LaunchRejected(f"this LMS link is not linked to an assignment yet: add it through the LMS's deep "
                                 f"linking, or give it the custom parameter {LINK_PARAM}=<value from the grader>")
        found = LtiLink(context_pk=ctx.id, resource_link_id=resource_link_id, assignment_id=assignment.id)
        session.add(found)
    elif assignment is not None:
        found.assignment_id = assignment.id  # staff re-pointed the link (a newer signed value)
    if lineitem:
        found.lineitem_url = lineitem
    session.flush()
    return found


def staff_of(session: Session, issuer: str, sub: str) -> int | None:
    """The staff account this LMS user linked before (in any of the platform's courses), if any."""
    return session.scalar(select(LtiUser.staff_pk).join(LtiContext, LtiContext.id == LtiUser.context_pk)
                          .where(LtiContext.issuer == issuer, LtiUser.sub == sub, LtiUser.staff_pk.is_not(None))
                          .limit(1))


def link_staff(session: Session, issuer: str, sub: str, staff_pk: int) -> int:
    """Link every LTI identity of this LMS user (on this platform) to a staff account."""
    users = list(session.scalars(select(LtiUser).join(LtiContext, LtiContext.id == LtiUser.context_pk)
                                 .where(LtiContext.issuer == issuer, LtiUser.sub == sub)))
    for user in users:
        user.staff_pk = staff_pk
    session.flush()
    return len(users)


def deep_link_request(platform: Platform, claims: dict[str, Any]) -> dict[str, Any]:
    """What answering a deep-linking launch needs later (kept in a signed cookie meanwhile)."""
    if not is_staff(claims.get(CLAIM + "roles") or []):
        raise LaunchRejected("only instructors can add the grader to an LMS course (deep linking)")
    settings = claims.get(DL_CLAIM + "deep_linking_settings") or {}
    if not settings.get("deep_link_return_url"):
        raise LaunchRejected("the deep-linking request has no deep_link_return_url")
    if "ltiResourceLink" not in (settings.get("accept_types") or ["ltiResourceLink"]):
        raise LaunchRejected("this LMS does not accept LTI resource links from deep linking")
    context = claims.get(CLAIM + "context") or {}
    return {"iss": platform.issuer, "client_id": platform.client_id, "sub": claims["sub"],
            "deployment_id": claims[CLAIM + "deployment_id"], "context_id": context.get("id", ""),
            "context_title": context.get("title", ""), "return_url": settings["deep_link_return_url"],
            "data": settings.get("data"), "name": claims.get("name", ""), "email": claims.get("email", "")}


def upsert_user(session: Session, ctx: LtiContext, sub: str, role: str, name: str, email: str, sourcedid: str
                ) -> LtiUser:
    """The LMS user in this context; a learner is matched to (or added as) a student of the course,
    by the LMS's SIS id, else the email, else the LTI user id (``student_of``)."""
    user = session.scalar(select(LtiUser).where(LtiUser.context_pk == ctx.id, LtiUser.sub == sub))
    student = None
    if role == "student" and (user is None or user.student_pk is None):
        student = student_of(session, ctx, sub, name, email, sourcedid)
    if user is None:
        user = LtiUser(context_pk=ctx.id, sub=sub, role=role)
        session.add(user)
    user.role, user.name, user.email = role, name or user.name or "", email or user.email or ""
    if student is not None:
        user.student_pk = student.id
    session.flush()
    return user


def student_of(session: Session, ctx: LtiContext, sub: str, name: str, email: str, sourcedid: str) -> Student:
    """The course's student with this LMS user's SIS id, else email, else LTI user id (made if
    there is none). A student already linked to another LMS account is refused: two LMS accounts
    with one email (Moodle allows it), or an SIS id equal to someone's email, are not one student."""
    student_id = next((i for i in (sourcedid, email) if i and len(i) <= STUDENT_ID_CHARS), sub)[:STUDENT_ID_CHARS]
    student = session.scalar(select(Student).where(Student.course_id == ctx.course_id,
                                                   Student.student_id == student_id))
    if student is None:  # a credential nobody sees: the student signs in through the LMS
        student = Student(course_id=ctx.course_id, student_id=student_id, name=name, email=email,
                          roster_json="{}", token_hash=token_hash(new_token("student")))
        session.add(student)
        session.flush()
        return student
    others = (select(LtiUser.id).join(LtiContext, LtiContext.id == LtiUser.context_pk)
              .where(LtiUser.student_pk == student.id, (LtiContext.issuer != ctx.issuer) | (LtiUser.sub != sub)))
    if session.scalar(others.limit(1)) is not None:
        raise LaunchRejected(f"this LMS account's id in the grader, {shown(student_id)}, is that of a student who "
                             f"opens the course from another LMS account: course staff can tell the two apart "
                             f"(give this account its own SIS id or email in the LMS)")
    return student


def record(session: Session, kind: str, issuer: str, detail: str) -> int:
    issuer, detail = issuer[:255], detail[:MAX_DETAIL]  # the columns; a request's own values are cut shorter
    event = LtiEvent(kind=kind, issuer=issuer, detail=detail)
    session.add(event)
    session.flush()
    log.warning("lti %s (%s): %s", kind, issuer or "unknown issuer", detail)
    return event.id
