"""The LTI endpoints, mounted on the service's app with ``app.include_router(router)``.

    GET|POST /lti/login     OIDC third-party login initiation (the platform calls it first)
    POST     /lti/launch    the id_token, verified and mapped to a course, assignment and user
    GET      /lti/jwks      the tool's public keys
    GET      /lti/staff-link  an instructor's first launch: link the LMS identity to a staff account
    GET|POST /lti/deep-link   deep linking: pick the assignment, answer the LMS with a signed link
    GET      /lti/register    LTI Dynamic Registration, with a staff invitation (POST /lti/registrations)
    staff:   GET /lti/passbacks, POST /lti/passbacks/retry, GET /lti/events, POST /lti/keys/rotate,
             POST /lti/courses/{course}/roster/sync (Names and Role Provisioning),
             GET /lti/courses/{course}/assignments/{assignment}/link (the link's custom parameter)
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import quote, urlparse

from fastapi import APIRouter, FastAPI, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ...errors import LaunchRejected, NeedsStaff
from ...results.database import Database
from ...results.lti_tables import LtiEvent, LtiPassback, LtiPlatform
from ...results.tables import Assignment, Staff, Student, utcnow
from ..auth import Principal
from ..deps import StaffOnly
from ..ops import NotFound, audit, course_by_slug
from ..web.pages import CSP, error_page, form_page, html, redirect
from ..web.sessions import (
    csrf_ok,
    load_secret,
    local_path,
    principal_of,
    secure,
    session_claim,
    set_session,
    start_session,
)
from . import keys
from .ags import PassbackLoop, Tokens, deliver_due
from .config import LtiConfig, config_path, load_config
from .deeplink import answer, choices
from .launch import (
    DEEP_LINKING,
    deep_link_request,
    link_staff,
    login_redirect,
    map_launch,
    message_type,
    record,
    replayable,
    staff_of,
    verify_id_token,
)
from .links import LINK_PARAM, link_value, seal, unseal
from .network import guarded_client
from .nrps import sync_roster
from .registration import (
    INVITE_TTL_S,
    Invitation,
    ask_platform,
    find_platform,
    invitation_url,
    store_registration,
    use_invitation,
)

STATE_COOKIE = "grader_lti_state_"  # + the login's state: one cookie per login, so that two tabs
# (or a double click) launching at once do not overwrite each other's
LINK_COOKIE, DL_COOKIE = "grader_lti_link", "grader_lti_dl"  # a verified launch, handed over a staff sign-in
HANDOVER_S = 3600
MAX_ID_TOKEN = 64 * 1024  # platforms' id_tokens are a few kB; a larger form is refused unread


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the passback loop when LTI is configured (the app's own lifespan migrates first)."""
    config = app_config(app)
    loop = None
    if config is not None:
        app.state.db.run(keys.signing_key)  # the tool's first key pair, made at the first start
        loop = PassbackLoop(app.state.db, config, tokens(app))
        loop.start()
    try:
        yield
    finally:
        if loop is not None:
            loop.stop()


router = APIRouter(prefix="/lti", tags=["lti"], lifespan=lifespan)


def app_config(app: FastAPI) -> LtiConfig | None:
    if not hasattr(app.state, "lti_config"):
        app.state.lti_config = load_config(config_path(app.state.settings.data_dir))
    config: LtiConfig | None = app.state.lti_config
    return config


def tokens(app: FastAPI) -> Tokens:
    if not hasattr(app.state, "lti_tokens"):
        app.state.lti_tokens = Tokens()
    found: Tokens = app.state.lti_tokens
    return found


def _config(request: Request) -> LtiConfig:
    config = app_config(request.app)
    if config is None:
        raise NotFound("LTI is not configured on this server (no lti.toml; see docs/LTI.md)")
    return config


def rejected(request: Request, reason: str, event_id: int | None) -> HTMLResponse:
    ref = f" Reference for course staff: LTI event {event_id}." if event_id is not None else ""
    return error_page(request, 400, f"This launch could not be accepted: {reason}. Open the assignment again from "
                                    f"your course in the LMS. If this keeps happening, tell course staff.{ref}")


@router.get("/login", response_model=None, operation_id="lti_login_get")
@router.post("/login", response_model=None, operation_id="lti_login_post")
async def login(request: Request) -> HTMLResponse | RedirectResponse:
    """OIDC third-party login initiation: platforms send it as GET or as a form POST."""
    config = _config(request)
    params = dict(request.query_params) | {k: str(v) for k, v in (await request.form()).items()}
    db: Database = request.app.state.db

    def work(s: Session) -> tuple[str, str] | tuple[None, HTMLResponse]:
        try:
            return login_redirect(s, config, params)
        except LaunchRejected as e:
            return None, rejected(request, str(e), record(s, "login_rejected", params.get("iss", ""), str(e)))

    target, state = await run_in_threadpool(db.run, work)
    if target is None:
        return state  # type: ignore[return-value]
    response = RedirectResponse(str(target), status_code=302)
    response.set_cookie(STATE_COOKIE + str(state), str(state), max_age=600, secure=True, httponly=True,
                        samesite="none")
    return response


@router.post("/launch", response_model=None)
async def launch(request: Request, id_token: Annotated[str, Form(max_length=MAX_ID_TOKEN)] = "",
                 state: Annotated[str, Form(max_length=200)] = "") -> HTMLResponse | RedirectResponse:
    """A verified launch signs the browser in: a learner lands on the assignment's page; an
    instructor on the staff dashboard once their LMS identity is linked to a staff account (the
    first time they sign in with its token); a deep-linking launch on the assignment picker."""
    config = _config(request)
    db: Database = request.app.state.db
    cookie = request.cookies.get(STATE_COOKIE + state) if state else None

    def work(s: Session) -> HTMLResponse | RedirectResponse:
        secret = load_secret(s)
        try:
            platform, claims = verify_id_token(s, config, id_token, state, cookie)
            if message_type(claims) == DEEP_LINKING:
                wanted = deep_link_request(platform, claims)
                response = _signed_in_as_staff(request, s, secret, platform.issuer, claims, "/lti/deep-link")
                _set_cookie(response, request, DL_COOKIE, seal(secret, DL_COOKIE, wanted, HANDOVER_S))
                audit(s, f"lti:{claims['sub']}", "lti_deep_link_launch", platform.issuer, {})
                return response
            done = map_launch(s, secret, platform, claims)
        except NeedsStaff as e:  # an instructor links a new LMS course: a staff sign-in first
            return _signed_in_as_staff(request, s, secret, platform.issuer, claims, e.then,
                                       replay={"client_id": platform.client_id, "claims": replayable(claims)})
        except LaunchRejected as e:
            return rejected(request, str(e), record(s, "launch_rejected", "", str(e)))
        audit(s, f"lti:{done.user}", "lti_launch", f"{done.course}/{done.assignment}", {"role": done.role})
        if done.student_pk is not None:
            student = s.get_one(Student, done.student_pk)
            response = redirect(f"/c/{done.course}/{done.assignment}")
            set_session(response, request, start_session(s, secret, "student", student.id, student.token_hash))
            return response
        return _signed_in_as_staff(request, s, secret, platform.issuer, claims,
                                   f"/staff/c/{done.course}/{done.assignment}")

    response: HTMLResponse | RedirectResponse = await run_in_threadpool(db.run, work)
    if cookie is not None:
        response.delete_cookie(STATE_COOKIE + state, secure=True, httponly=True, samesite="none")
    return response


def _signed_in_as_staff(request: Request, s: Session, secret: bytes, issuer: str, claims: dict[str, Any],
                        then: str, replay: dict[str, Any] | None = None) -> RedirectResponse:
    """To ``then`` with a staff session if this LMS user linked a staff account before; otherwise
    to the sign-in page, after which ``/lti/staff-link`` links them (LMS roles alone grant nothing)
    and maps the launch in ``replay`` again, as staff's."""
    sub = claims["sub"]
    staff_pk = staff_of(s, issuer, sub)
    staff = s.get(Staff, staff_pk) if staff_pk is not None else None
    if staff is not None:
        response = redirect(then)
        set_session(response, request, start_session(s, secret, "staff", staff.id, staff.token_hash))
        return response
    response = redirect("/signin?next=" + quote(f"/lti/staff-link?then={quote(then, safe='')}", safe=""))
    pending = {"iss": issuer, "sub": sub, "name": claims.get("name", ""), "email": claims.get("email", "")}
    pending |= replay or {}
    _set_cookie(response, request, LINK_COOKIE, seal(secret, LINK_COOKIE, pending, HANDOVER_S))
    return response


def _set_cookie(response: Response, request: Request, name: str, value: str) -> None:
    response.set_cookie(name, value, max_age=HANDOVER_S, path="/lti/", httponly=True, samesite="lax",
                        secure=secure(request))


def _staff_session(request: Request, s: Session, secret: bytes) -> Principal | None:
    claim = session_claim(secret, request)
    who = principal_of(s, claim) if claim is not None else None
    return who if who is not None and who.staff else None


@router.get("/staff-link", response_model=None)
def staff_link_form(request: Request, then: str = "/staff") -> Response:
    """After an instructor's launch and their staff sign-in: the staff member confirms that the LMS
    account of the launch is theirs (a form, so that no other page can link an account of its
    choosing to the staff account signed in)."""
    db: Database = request.app.state.db

    def work(s: Session) -> Response:
        secret = load_secret(s)
        pending, who = _pending_link(request, s, secret)
        if pending is None:
            return _no_pending_link(request)
        if not isinstance(who, Principal):  # to the sign-in page first
            return who or _no_pending_link(request)
        lms_user = " ".join(str(pending.get(k) or "") for k in ("name", "email")).strip() or str(pending["sub"])
        return form_page(request, secret, "lti_staff_link.html", who=who, when=None,
                         then=local_path(then) or "/staff", issuer=pending["iss"], lms_user=lms_user)

    return db.run(work)


@router.post("/staff-link", response_model=None)
def staff_link(request: Request, csrf: Annotated[str, Form(max_length=200)],
               then: Annotated[str, Form(max_length=300)] = "/staff") -> Response:
    """Link the LMS identity of the waiting launch to the staff account signed in (confirmed)."""
    db: Database = request.app.state.db

    def work(s: Session) -> Response:
        secret = load_secret(s)
        if not csrf_ok(secret, request, csrf):
            return error_page(request, 403, "This form has expired or came from another site; open the assignment "
                                            "again from the LMS.")
        pending, who = _pending_link(request, s, secret)
        if pending is None or not isinstance(who, Principal):
            return _no_pending_link(request) if pending is None else error_page(request, 403, "Sign in as staff first.")
        staff = s.scalars(select(Staff).where(Staff.name == who.name)).one()
        if isinstance(pending.get("claims"), dict):  # the launch that links a new LMS course, now as staff's
            platform = find_platform(s, _config(request), pending["iss"], pending.get("client_id"))
            try:
                if platform is None:
                    raise LaunchRejected(f"the platform {pending['iss']!r} is no longer registered")
                map_launch(s, secret, platform, pending["claims"], staff_pk=staff.id)
            except LaunchRejected as e:
                return error_page(request, 400, f"The LMS course could not be linked: {e}.")
        link_staff(s, pending["iss"], pending["sub"], staff.id)
        audit(s, who.name, "lti_link_staff", pending["iss"], {"sub": pending["sub"]})
        response = redirect(local_path(then) or "/staff")
        response.delete_cookie(LINK_COOKIE, path="/lti/")
        return response

    return db.run(work)


def _pending_link(request: Request, s: Session, secret: bytes
                  ) -> tuple[dict[str, Any] | None, Principal | RedirectResponse | None]:
    """The launch waiting to be linked (None: none, or expired) and the staff member signed in (a
    redirect to the sign-in page when nobody is)."""
    pending = unseal(secret, LINK_COOKIE, request.cookies.get(LINK_COOKIE, ""))
    if pending is None:
        return None, None
    who = _staff_session(request, s, secret)
    if who is None:
        return pending, redirect("/signin?next=" + quote(str(request.url.path) + "?" + str(request.url.query)))
    return pending, who


def _no_pending_link(request: Request) -> HTMLResponse:
    return error_page(request, 400, "There is no LMS launch waiting to be linked (or it is older than an hour). Open "
                                    "the assignment again from the LMS.")


@router.get("/deep-link", response_model=None)
def deep_link_form(request: Request) -> Response:
    """The assignment picker of a deep-linking launch (staff only)."""
    db: Database = request.app.state.db

    def work(s: Session) -> Response:
        secret = load_secret(s)
        wanted = unseal(secret, DL_COOKIE, request.cookies.get(DL_COOKIE, ""))
        if wanted is None:
            return error_page(request, 400, "There is no deep-linking request from an LMS waiting (or it is older "
                                            "than an hour). Start again from the LMS's “add external tool” dialog.")
        who = _staff_session(request, s, secret)
        if who is None:
            return redirect("/signin?next=/lti/deep-link")
        return form_page(request, secret, "lti_deep_link.html", who=who, when=None,
                         choices=choices(s, wanted), context_title=wanted.get("context_title", ""))

    return db.run(work)


@router.post("/deep-link", response_model=None)
def deep_link_answer(request: Request, csrf: Annotated[str, Form(max_length=200)],
                     assignment: Annotated[str, Form(max_length=200)]) -> Response:
    """Answer the LMS: a page that posts the signed deep-linking response to its return URL."""
    config = _config(request)
    db: Database = request.app.state.db

    def work(s: Session) -> Response:
        secret = load_secret(s)
        if not csrf_ok(secret, request, csrf):
            return error_page(request, 403, "This form has expired or came from another site; start again from the LMS.")
        wanted = unseal(secret, DL_COOKIE, request.cookies.get(DL_COOKIE, ""))
        who = _staff_session(request, s, secret)
        if wanted is None or who is None:
            return error_page(request, 400, "The deep-linking request expired; start again from the LMS.")
        staff = s.scalars(select(Staff).where(Staff.name == who.name)).one()
        try:
            token = answer(s, config, secret, wanted, assignment, staff.id)
        except LaunchRejected as e:
            return error_page(request, 400, str(e))
        audit(s, who.name, "lti_deep_link", assignment, {"iss": wanted["iss"], "context": wanted["context_id"]})
        target = wanted["return_url"]
        origin = "{0.scheme}://{0.netloc}".format(urlparse(target))
        csp = CSP.replace("form-action 'self'", f"form-action 'self' {origin}")
        response = html("lti_post.html", headers={"Content-Security-Policy": csp}, who=None, csrf="", when=None,
                        action=target, fields={"JWT": token}, what="the link to the LMS")
        response.delete_cookie(DL_COOKIE, path="/lti/")
        return response

    return db.run(work)


@router.get("/courses/{course}/assignments/{assignment}/link")
def assignment_link(course: str, assignment: str, request: Request, principal: StaffOnly) -> dict[str, str]:
    """The custom parameter that points an LMS link at this assignment (for LMSs without deep linking)."""
    db: Database = request.app.state.db

    def work(s: Session) -> dict[str, str]:
        found = course_by_slug(s, course)
        if s.scalar(select(Assignment).where(Assignment.course_id == found.id, Assignment.slug == assignment)) is None:
            raise NotFound(f"course {course!r} has no assignment {assignment!r}")
        value = link_value(load_secret(s), found.slug, assignment)
        config = app_config(request.app)
        return {"parameter": LINK_PARAM, "value": value, "custom": f"{LINK_PARAM}={value}",
                "launch_url": config.launch_url if config else ""}

    return db.run(work)


@router.post("/registrations")
def new_registration(request: Request, principal: StaffOnly) -> dict[str, Any]:
    """An invitation for LTI Dynamic Registration: paste the URL into the LMS's "register a tool by
    URL" field. It is valid for a day and registers one platform."""
    config = _config(request)
    db: Database = request.app.state.db

    def work(s: Session) -> dict[str, Any]:
        audit(s, principal.name, "lti_registration_invite", "", {})
        return {"url": invitation_url(config, load_secret(s), principal.name), "expires_in_s": INVITE_TTL_S}

    return db.run(work)


@router.get("/register", response_model=None)
async def register_platform(request: Request, invite: str = "", openid_configuration: str = "",
                            registration_token: str = "") -> Response:
    """LTI Dynamic Registration, opened by the LMS (in a frame or a window) with an invitation.

    The invitation is used up first (in its own transaction); then the platform is asked, with no
    store open; then what it answered is kept. A failure after the invitation is used shows only
    "registration failed" and the staff log's event number: whether an address answered, how,
    or with what, is for staff (GET /lti/events), not for whoever opened the link."""
    config = _config(request)
    db: Database = request.app.state.db

    def use(s: Session) -> Invitation | HTMLResponse:
        try:
            return use_invitation(s, load_secret(s), invite, openid_configuration)
        except LaunchRejected as e:
            record(s, "registration_rejected", "", str(e))
            return error_page(request, 400, f"The grader could not register with this LMS: {e}.")

    invitation = await run_in_threadpool(db.run, use)
    if not isinstance(invitation, Invitation):
        return invitation
    try:
        with guarded_client(config.allow_private_networks) as http:
            answered = await run_in_threadpool(ask_platform, config, openid_configuration, registration_token, http)
    except LaunchRejected as e:
        return _registration_failed(request, db, invitation, str(e))

    def store(s: Session) -> LtiPlatform | str:
        try:
            row = store_registration(s, invitation, answered)
        except LaunchRejected as e:
            return str(e)
        audit(s, row.registered_by or "lti", "lti_register", row.issuer, {"client_id": row.client_id})
        return row

    row = await run_in_threadpool(db.run, store)
    if isinstance(row, str):
        return _registration_failed(request, db, invitation, row)
    origin = "{0.scheme}://{0.netloc}".format(urlparse(row.issuer))
    csp = CSP.replace("frame-ancestors 'none'", f"frame-ancestors {origin}")
    response = html("lti_registered.html", headers={"Content-Security-Policy": csp}, who=None, csrf="",
                    when=None, issuer=row.issuer, client_id=row.client_id, product=row.product,
                    deployments=json.loads(row.deployment_ids_json))
    del response.headers["x-frame-options"]
    return response


def _registration_failed(request: Request, db: Database, invitation: Invitation, detail: str) -> HTMLResponse:
    """The same page whatever went wrong; the detail goes to the staff log (and the service log)."""
    event = db.run(lambda s: record(s, "registration_failed", "",
                                    f"{detail} (invitation {invitation.rid[:8]} made by {invitation.by or 'staff'})"))
    return error_page(request, 400, f"The grader could not register with this LMS: registration failed. Ask course "
                                    f"staff for a new registration link; reference for course staff: LTI event "
                                    f"{event}.")


@router.get("/jwks")
def jwks(request: Request) -> JSONResponse:
    db: Database = request.app.state.db
    return JSONResponse(db.run(keys.jwks), headers={"Cache-Control": "max-age=300"})


@router.post("/keys/rotate")
def rotate_keys(request: Request, principal: StaffOnly) -> dict[str, Any]:
    def work(s: Session) -> dict[str, Any]:
        new = keys.rotate(s)
        audit(s, principal.name, "lti_rotate_key", new.kid)
        return {"kid": new.kid}

    db: Database = request.app.state.db
    return db.run(work)


@router.get("/passbacks")
def passbacks(request: Request, principal: StaffOnly, state: str | None = None) -> list[dict[str, Any]]:
    """Score passbacks, newest first: ``state=failed`` lists those the platform has not taken yet."""
    def work(s: Session) -> list[dict[str, Any]]:
        query = select(LtiPassback).order_by(LtiPassback.id.desc()).limit(500)
        if state:
            query = query.where(LtiPassback.state == state)
        return [{"id": p.id, "grading_id": p.grading_id, "state": p.state, "score_given": p.score_given,
                 "score_maximum": p.score_maximum, "timestamp": p.timestamp.isoformat(), "attempts": p.attempts,
                 "next_attempt_at": p.next_attempt_at.isoformat(), "last_error": p.last_error,
                 "sent_at": p.sent_at.isoformat() if p.sent_at else None} for p in s.scalars(query)]

    db: Database = request.app.state.db
    return db.run(work)


@router.post("/passbacks/retry")
async def retry_passbacks(request: Request, principal: StaffOnly) -> dict[str, int]:
    """Send every unsent passback now (instead of at its next backoff time)."""
    config = _config(request)
    db: Database = request.app.state.db
    db.run(lambda s: s.execute(update(LtiPassback).where(LtiPassback.state.in_(("failed", "held", "pending")))
                               .values(next_attempt_at=utcnow())))
    delivered = await run_in_threadpool(deliver_due, db, config, tokens(request.app))
    return {"delivered": delivered}


@router.post("/passbacks/retry-now", response_model=None)
async def retry_passbacks_page(request: Request, csrf: Annotated[str, Form(max_length=200)],
                               back: Annotated[str, Form(max_length=300)] = "/staff") -> Response:
    """The dashboard's button: send every waiting passback now, then back to the dashboard."""
    config = _config(request)
    db: Database = request.app.state.db

    def allowed(s: Session) -> Principal | None:
        secret = load_secret(s)
        return _staff_session(request, s, secret) if csrf_ok(secret, request, csrf) else None

    who = db.run(allowed)
    if who is None:
        return error_page(request, 403, "Staff only, from the dashboard's own form: reload the dashboard and try again.")
    db.run(lambda s: s.execute(update(LtiPassback).where(LtiPassback.state.in_(("failed", "held", "pending")))
                               .values(next_attempt_at=utcnow())))
    await run_in_threadpool(deliver_due, db, config, tokens(request.app))
    db.run(lambda s: audit(s, who.name, "lti_retry_passbacks", "", {}))
    return redirect(local_path(back) or "/staff")


@router.get("/events")
def events(request: Request, principal: StaffOnly) -> list[dict[str, Any]]:
    db: Database = request.app.state.db
    return db.run(lambda s: [{"id": e.id, "at": e.at.isoformat(), "kind": e.kind, "issuer": e.issuer,
                              "detail": e.detail}
                             for e in s.scalars(select(LtiEvent).order_by(LtiEvent.id.desc()).limit(500))])


@router.post("/courses/{course}/roster/sync")
async def roster_sync(course: str, request: Request, principal: StaffOnly) -> dict[str, Any]:
    """Import the course's roster from the LMS (Names and Role Provisioning Services)."""
    config = _config(request)
    db: Database = request.app.state.db
    course_id = db.run(lambda s: course_by_slug(s, course).id)
    return await run_in_threadpool(sync_roster, db, config, tokens(request.app), course_id, principal.name)
