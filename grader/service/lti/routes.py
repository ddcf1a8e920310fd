"""The LTI endpoints, mounted on the service's app with ``app.include_router(router)``.

    GET|POST /lti/login     OIDC third-party login initiation (the platform calls it first)
    POST     /lti/launch    the id_token, verified and mapped to a course, assignment and user
    GET      /lti/jwks      the tool's public keys
    staff:   GET /lti/passbacks, POST /lti/passbacks/retry, GET /lti/events, POST /lti/keys/rotate,
             POST /lti/courses/{course}/roster/sync (Names and Role Provisioning)
"""

from __future__ import annotations

import html
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from ...errors import LaunchRejected
from ..auth import Principal, authenticate, bearer, require_staff
from ..database import Database
from ..ops import NotFound, audit, course_by_slug
from ..tables import utcnow
from . import keys
from .ags import PassbackLoop, Tokens, deliver_due
from .config import LtiConfig, config_path, load_config
from .launch import login_redirect, map_launch, record, verify_id_token
from .models import LtiEvent, LtiPassback
from .nrps import sync_roster

STATE_COOKIE = "grader_lti_state"


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Start the passback loop when LTI is configured (the app's own lifespan migrates first)."""
    config = app_config(app)
    loop = None
    if config is not None:
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


def _staff(request: Request) -> Principal:
    db: Database = request.app.state.db
    token = bearer(request)
    principal = db.run(lambda s: authenticate(s, token))
    require_staff(principal)
    return principal


StaffOnly = Annotated[Principal, Depends(_staff)]


def page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(f"<!doctype html><html><head><meta charset=utf-8><title>{html.escape(title)}</title></head>"
                        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>", status_code=status)


def rejected(reason: str, event_id: int | None) -> HTMLResponse:
    ref = f" Reference for course staff: LTI event {event_id}." if event_id is not None else ""
    return page("This launch could not be accepted",
                f"<p>{html.escape(reason)}.</p><p>Open the assignment again from your course in the LMS. If this "
                f"keeps happening, tell course staff.{html.escape(ref)}</p>", status=400)


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
            return None, rejected(str(e), record(s, "login_rejected", params.get("iss", ""), str(e)))

    target, state = await run_in_threadpool(db.run, work)
    if target is None:
        return state  # type: ignore[return-value]
    response = RedirectResponse(str(target), status_code=302)
    response.set_cookie(STATE_COOKIE, str(state), max_age=600, secure=True, httponly=True, samesite="none")
    return response


@router.post("/launch")
async def launch(request: Request, id_token: Annotated[str, Form()] = "", state: Annotated[str, Form()] = ""
                 ) -> HTMLResponse:
    config = _config(request)
    db: Database = request.app.state.db
    cookie = request.cookies.get(STATE_COOKIE)

    def work(s: Session) -> HTMLResponse:
        try:
            platform, claims = verify_id_token(s, config, id_token, state, cookie)
            done = map_launch(s, platform, claims)
        except LaunchRejected as e:
            return rejected(str(e), record(s, "launch_rejected", "", str(e)))
        audit(s, f"lti:{done.user}", "lti_launch", f"{done.course}/{done.assignment}", {"role": done.role})
        return page(f"{done.course} / {done.assignment}",
                    f"<p>Signed in from the LMS as <b>{html.escape(done.user)}</b> ({done.role}).</p>"
                    f"<p data-course='{html.escape(done.course)}' data-assignment='{html.escape(done.assignment)}'"
                    f" data-role='{done.role}' data-user='{html.escape(done.user)}'></p>")

    response: HTMLResponse = await run_in_threadpool(db.run, work)
    response.delete_cookie(STATE_COOKIE)
    return response


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
