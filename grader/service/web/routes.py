"""The web pages' routes. Each one signs the browser in from its session cookie, checks who may
see what exactly as the API does (``auth.own_submission``, ``require_course``, staff only), and
renders a template; every POST carries a CSRF token."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, File, Form, HTTPException, Path, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...errors import Forbidden, SignInFirst
from ...results.tables import Staff, Student, utcnow
from .. import ops
from ..auth import Principal, authenticate, own_submission
from ..exports import export
from ..schemas import SLUG, SUBMISSION_ID
from . import data
from .pages import form_page, static_file
from .sessions import (
    clear_session,
    csrf_ok,
    end_session,
    end_sessions,
    load_secret,
    local_path,
    principal_of,
    session_claim,
    set_session,
    start_session,
)
from .setup import setup_router

Slug = Annotated[str, Path(pattern=SLUG)]
SubmissionId = Annotated[str, Path(pattern=SUBMISSION_ID)]
Csrf = Annotated[str, Form(max_length=200)]


@dataclass(frozen=True)
class WebHooks:
    """What the pages share with the API's routes (defined in ``app.create_app``)."""

    run: Callable[[Callable[[Session], Any]], Any]
    accept_upload: Callable[..., Awaitable[dict[str, Any]]]
    status_events: Callable[[Principal, str], Awaitable[StreamingResponse]]
    regrade_one: Callable[[Principal, str], dict[str, Any]]
    regrade_every: Callable[[Principal, str, str], int]
    # the LMS gradebook panel of an assignment's dashboard (LTI passbacks), None without LMS links
    lms_panel: Callable[[Session, int], dict[str, Any] | None] = lambda _s, _a: None


def moment(value: datetime | str | None) -> dict[str, str] | None:
    """A time for ``<time datetime=…>``: app.js shows it in the viewer's zone; UTC without script."""
    if value is None:
        return None
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return {"iso": at.isoformat(), "text": at.strftime("%Y-%m-%d %H:%M UTC")}


class Web:
    def __init__(self, hooks: WebHooks) -> None:
        self.hooks = hooks
        self._secret: bytes | None = None

    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = self.hooks.run(load_secret)
        return self._secret

    def who(self, request: Request) -> Principal | None:
        claim = session_claim(self.secret(), request)
        if claim is None:
            return None
        found: Principal | None = self.hooks.run(lambda s: principal_of(s, claim))
        return found

    def signed_in(self, request: Request, *, staff: bool = False) -> Principal:
        who = self.who(request)
        if who is None:
            raise SignInFirst()
        if staff and not who.staff:
            raise Forbidden("staff only: this page is for course staff")
        return who

    def check_csrf(self, request: Request, token: str) -> None:
        if not csrf_ok(self.secret(), request, token):
            raise Forbidden("this form has expired or came from another site; reload the page and try again")

    def page(self, request: Request, template: str, who: Principal | None, *, status: int = 200,
             **context: Any) -> Response:
        return form_page(request, self.secret(), template, status=status, who=who, when=moment, **context)


def redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


def mount_web(app: FastAPI, hooks: WebHooks) -> None:
    web = Web(hooks)
    run = hooks.run
    router = APIRouter(include_in_schema=False)

    @app.exception_handler(SignInFirst)
    async def sign_in_first(request: Request, _e: SignInFirst) -> Response:
        if "application/json" in request.headers.get("accept", "") or request.method != "GET":
            return JSONResponse({"detail": "sign in first"}, status_code=401)
        return redirect(f"/signin?next={quote(request.url.path)}")

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        return static_file(name)

    @router.get("/")
    def home(request: Request) -> Response:
        who = web.who(request)
        return redirect("/signin" if who is None else "/staff" if who.staff else "/home")

    # ---- signing in and out --------------------------------------------------------------------------

    @router.get("/signin")
    def signin_form(request: Request, next: str = "") -> Response:
        return web.page(request, "signin.html", web.who(request), next=local_path(next), error="")

    @router.post("/signin")
    def signin(request: Request, token: Annotated[str, Form(max_length=300)], csrf: Csrf,
               next: Annotated[str, Form(max_length=500)] = "") -> Response:
        web.check_csrf(request, csrf)

        def work(s: Session) -> str:
            who = authenticate(s, token.strip())
            row = s.scalar(select(Staff).where(Staff.name == who.name)) if who.staff else s.get(Student, who.student_pk)
            assert row is not None
            return start_session(s, web.secret(), who.kind, row.id, row.token_hash)

        try:
            value = run(work)
        except HTTPException:
            return web.page(request, "signin.html", None, status=401, next=local_path(next),
                            error="That sign-in token is not known. Paste the whole token you were given "
                                  "(it starts with student_ or staff_).")
        response = redirect(local_path(next) or "/")
        set_session(response, request, value)
        return response

    @router.post("/signout")
    def signout(request: Request, csrf: Csrf) -> Response:
        """This browser's session ends in the store too: a copy of its cookie is dead."""
        web.check_csrf(request, csrf)
        claim = session_claim(web.secret(), request)
        if claim is not None:
            run(lambda s: end_session(s, claim))
        response = redirect("/signin")
        clear_session(response, request)
        return response

    @router.post("/staff/signout-everywhere")
    def signout_everywhere(request: Request, csrf: Csrf) -> Response:
        """Staff end every session of theirs, in every browser (this one too)."""
        web.check_csrf(request, csrf)
        who = web.signed_in(request, staff=True)

        def work(s: Session) -> None:
            staff = s.scalars(select(Staff).where(Staff.name == who.name)).one()
            ended = end_sessions(s, "staff", staff.id)
            ops.audit(s, who.name, "signout_everywhere", who.name, {"sessions": ended})

        run(work)
        response = redirect("/signin")
        clear_session(response, request)
        return response

    # ---- student pages -------------------------------------------------------------------------------

    @router.get("/home")
    def student_home(request: Request) -> Response:
        who = web.signed_in(request)
        if who.staff:
            return redirect("/staff")
        course, assignments = run(lambda s: data.student_course(s, who))
        return web.page(request, "home.html", who, course=course, assignments=assignments)

    @router.get("/c/{course}/{assignment}")
    def assignment_page(request: Request, course: Slug, assignment: Slug) -> Response:
        who = web.signed_in(request)
        if who.staff:
            return redirect(f"/staff/c/{course}/{assignment}")
        c, a, attempts = run(lambda s: data.attempts(s, who, course, assignment, utcnow()))
        return web.page(request, "assignment.html", who, course=c, assignment=a, attempts=attempts,
                        accept=".ipynb,.py", max_kib=app.state.settings.max_upload_bytes // 1024)

    @router.post("/c/{course}/{assignment}/upload")
    async def upload(request: Request, course: Slug, assignment: Slug, csrf: Csrf,
                     file: Annotated[UploadFile, File()]) -> Response:
        web.check_csrf(request, csrf)
        who = await run_in_threadpool(web.signed_in, request)
        if who.staff:
            raise Forbidden("staff submit for a student through the API (form field student_id)")
        view = await hooks.accept_upload(who, course, assignment, request, file)
        url = f"/s/{view['id']}"
        if "application/json" in request.headers.get("accept", ""):
            return JSONResponse({"url": url, "id": view["id"], "created": view["created"]}, status_code=202)
        return redirect(url)

    @router.get("/c/{course}/{assignment}/compare")
    def compare(request: Request, course: Slug, assignment: Slug,
                a: Annotated[str, Query(pattern=SUBMISSION_ID)], b: Annotated[str, Query(pattern=SUBMISSION_ID)]
                ) -> Response:
        who = web.signed_in(request)
        if who.staff:
            raise Forbidden("the comparison is a student's page; staff see every attempt on the submission page")
        found = run(lambda s: data.compare(s, who, course, assignment, a, b, utcnow()))
        return web.page(request, "compare.html", who, **found)

    @router.get("/s/{submission_id}")
    def submission(request: Request, submission_id: SubmissionId) -> Response:
        who = web.signed_in(request)
        if who.staff:
            return redirect(f"/staff/s/{submission_id}")
        found = run(lambda s: data.student_submission(s, who, submission_id, utcnow()))
        return web.page(request, "submission.html", who, **found)

    @router.get("/s/{submission_id}/events")
    async def events(request: Request, submission_id: SubmissionId) -> Response:
        who = await run_in_threadpool(web.signed_in, request)
        return await hooks.status_events(who, submission_id)

    # ---- staff pages ---------------------------------------------------------------------------------

    @router.get("/staff")
    def staff_home(request: Request) -> Response:
        who = web.signed_in(request, staff=True)
        return web.page(request, "staff_home.html", who, **run(data.staff_home))

    @router.get("/staff/c/{course}/{assignment}")
    def dashboard(request: Request, course: Slug, assignment: Slug, status: str = "", min_score: str = "",
                  max_score: str = "", check: str = "", late: str = "",
                  regrading: Annotated[int | None, Query(ge=0)] = None) -> Response:
        who = web.signed_in(request, staff=True)
        filters = data.Filters(status=status[:32], min_score=_number(min_score), max_score=_number(max_score),
                               check=check[:64], late=late if late in ("yes", "no") else "")
        def work(s: Session) -> dict[str, Any]:
            found = data.dashboard(s, course, assignment, filters)
            return found | {"lms": web.hooks.lms_panel(s, found["assignment"].id)}

        return web.page(request, "dashboard.html", who, regrading=regrading, **run(work))

    @router.post("/staff/c/{course}/{assignment}/regrade")
    def regrade_all(request: Request, course: Slug, assignment: Slug, csrf: Csrf) -> Response:
        web.check_csrf(request, csrf)
        who = web.signed_in(request, staff=True)
        count = hooks.regrade_every(who, course, assignment)
        return redirect(f"/staff/c/{course}/{assignment}?regrading={count}")

    @router.get("/staff/c/{course}/{assignment}/export/{fmt}")
    def export_file(request: Request, course: Slug, assignment: Slug, fmt: Slug) -> Response:
        web.signed_in(request, staff=True)

        def work(s: Session) -> tuple[str, bytes, str, list[str]]:
            return export(s, ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment), fmt)

        name, content, media, _problems = run(work)
        return Response(content, media_type=media, headers={"Content-Disposition": f'attachment; filename="{name}"',
                                                            "Cache-Control": "no-store"})

    @router.get("/staff/s/{submission_id}")
    def staff_submission(request: Request, submission_id: SubmissionId) -> Response:
        who = web.signed_in(request, staff=True)
        found = run(lambda s: data.staff_submission(s, submission_id, who))
        return web.page(request, "staff_submission.html", who, **found)

    @router.post("/staff/s/{submission_id}/regrade")
    def regrade(request: Request, submission_id: SubmissionId, csrf: Csrf) -> Response:
        web.check_csrf(request, csrf)
        who = web.signed_in(request, staff=True)
        hooks.regrade_one(who, submission_id)
        return redirect(f"/staff/s/{submission_id}")

    @router.post("/staff/s/{submission_id}/override")
    def override(request: Request, submission_id: SubmissionId, csrf: Csrf,
                 score: Annotated[float, Form(ge=0, le=1_000_000)],
                 reason: Annotated[str, Form(min_length=3, max_length=2000)]) -> Response:
        web.check_csrf(request, csrf)
        who = web.signed_in(request, staff=True)

        def work(s: Session) -> None:
            ops.add_override(s, own_submission(s, who, submission_id), score, reason.strip(), who.name)

        run(work)
        return redirect(f"/staff/s/{submission_id}")

    @router.post("/staff/s/{submission_id}/override/remove")
    def remove_override(request: Request, submission_id: SubmissionId, csrf: Csrf) -> Response:
        web.check_csrf(request, csrf)
        who = web.signed_in(request, staff=True)
        run(lambda s: ops.remove_override(s, own_submission(s, who, submission_id), who.name))
        return redirect(f"/staff/s/{submission_id}")

    app.include_router(router)
    app.include_router(setup_router(web))


def _number(text: str) -> float | None:
    try:
        value = float(text) if text.strip() else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None

