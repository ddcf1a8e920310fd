"""The HTTP API (FastAPI; OpenAPI at ``/docs``). Routes only translate HTTP to ``ops`` and
``views``; every database unit of work runs through ``Database.run`` (retried on restarts)."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypeVar

from fastapi import Depends, FastAPI, File, Form, Path, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import __version__
from ..results.database import Database, StoreUnavailable
from ..results.roster import RosterError, parse_roster
from ..results.tables import Assignment, Audit, Course, Staff, Student, Submission, utcnow
from . import ops, uploads
from .auth import Principal, authenticate, bearer, own_submission, require_course, require_staff
from .bodies import CheckedRoute
from .dispatch import CeleryDispatcher, Dispatcher, LocalPool
from .exports import check_stats, export
from .limits import BodyLimit, HeldStream, Waiting, token_checker
from .lti.ags import passback_panel
from .lti.routes import router as lti_router
from .metrics import registry
from .notify import Subscriber
from .schemas import SLUG, SUBMISSION_ID, AssignmentIn, AssignmentPatch, CourseIn, OverrideIn
from .settings import Settings
from .sweeper import Sweeper, hand_over, sweep
from .views import assignment_view, course_view, staff_result, status_view, student_result
from .web import WebHooks, error_page, is_page, mount_web

log = logging.getLogger("grader.service")
T = TypeVar("T")
Slug = Annotated[str, Path(pattern=SLUG)]
SubmissionId = Annotated[str, Path(pattern=SUBMISSION_ID)]


def current_principal(request: Request) -> Principal:
    token = bearer(request)
    db: Database = request.app.state.db
    return db.run(lambda s: authenticate(s, token))


def current_staff(request: Request) -> Principal:
    """Staff only. FastAPI reads a route's body before its dependencies run: what keeps a body from
    being read before authentication is ``limits.BodyLimit`` (its size, and a known token)."""
    principal = current_principal(request)
    require_staff(principal)
    return principal


Who = Annotated[Principal, Depends(current_principal)]
StaffOnly = Annotated[Principal, Depends(current_staff)]


class Waiters:
    """Wakes long polls and event streams as soon as an in-process grader commits a result
    (workers on other hosts are seen by polling the store)."""

    def __init__(self) -> None:
        self._events: dict[str, set[asyncio.Event]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None

    def notify(self, submission_id: str) -> None:  # any thread
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._set, submission_id)

    def _set(self, submission_id: str) -> None:
        for event in self._events.get(submission_id, ()):
            event.set()

    def register(self, submission_id: str) -> asyncio.Event:
        event = asyncio.Event()
        self._events.setdefault(submission_id, set()).add(event)
        return event

    def unregister(self, submission_id: str, event: asyncio.Event) -> None:
        waiting = self._events.get(submission_id, set())
        waiting.discard(event)
        if not waiting:
            self._events.pop(submission_id, None)


def who_waits(principal: Principal) -> str:
    return f"{principal.kind}:{principal.student_pk if principal.student_pk is not None else principal.name}"


def bootstrap_staff(db: Database) -> str | None:
    """On first start (no staff yet): the first staff credential, to be printed once."""
    def first(session: Session) -> str | None:
        if session.scalar(select(Staff.id).limit(1)) is not None:
            return None
        return ops.add_staff(session, "admin")

    return db.run(first)


def create_app(settings: Settings, *, dispatcher: Dispatcher | None = None,
               announce: Callable[[str], None] = print) -> FastAPI:
    """The application. ``dispatcher`` defaults to the in-process pool (embedded) or Celery."""
    db = Database(settings.database_url)
    waiters = Waiters()
    waiting = Waiting(settings.streams_per_student, settings.streams_total)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        waiters.loop = asyncio.get_running_loop()
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        await run_in_threadpool(db.migrate)
        token = await run_in_threadpool(bootstrap_staff, db)
        if token is not None:
            announce(f"staff sign-in (shown once, keep it safe): Authorization: Bearer {token}")
        chosen = dispatcher or (LocalPool(db, settings, on_done=waiters.notify) if settings.embedded
                                else CeleryDispatcher(settings))
        app.state.dispatcher = chosen
        sweeper = Sweeper(db, chosen, settings.sweep_interval_s, settings.pending_timeout_s, settings.worker_lost_s)
        subscriber = None if settings.embedded else Subscriber(settings.broker, waiters.notify)
        if subscriber is None:  # embedded: what was queued or in progress when the last run stopped
            await run_in_threadpool(sweep, db, chosen, 0.0)
        else:
            subscriber.start()
        sweeper.start()
        try:
            yield
        finally:
            sweeper.stop()
            if subscriber is not None:
                subscriber.stop()
            await run_in_threadpool(chosen.close)  # the embedded pool finishes its work first
            await run_in_threadpool(uploads.shutdown)
            db.dispose()

    app = FastAPI(title="TinyTorch grading service", version=__version__, lifespan=lifespan)
    app.router.route_class = CheckedRoute  # JSON bodies nested too deeply: 422 (bodies.py)
    app.state.db, app.state.settings, app.state.waiters, app.state.waiting = db, settings, waiters, waiting
    app.add_middleware(BodyLimit, settings=settings, signed_in=token_checker(db))
    metrics_registry = registry(db)
    app.include_router(lti_router)

    @app.exception_handler(ops.ServiceError)
    async def service_error(request: Request, e: ops.ServiceError) -> Response:
        headers = {"Retry-After": str(e.retry_after)} if e.retry_after is not None else None
        if is_page(request):
            return error_page(request, e.status, str(e), headers)
        return JSONResponse({"detail": str(e)}, status_code=e.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, e: RequestValidationError) -> Response:
        """422 with each problem's place and message, never the input echoed back (it may be large
        or someone else's); a page for browsers."""
        problems = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in e.errors()[:20]]
        if is_page(request):
            said = "; ".join(f"{'.'.join(str(x) for x in p['loc'][1:]) or 'request'}: {p['msg']}" for p in problems)
            return error_page(request, 400, f"The form sent something this page cannot take ({said}). Go back, "
                                            f"reload the page and try again.")
        return JSONResponse({"detail": problems}, status_code=422)

    @app.exception_handler(StoreUnavailable)
    async def store_down(request: Request, e: StoreUnavailable) -> Response:
        message = f"the database is unavailable; try again shortly ({e})"
        if is_page(request):
            return error_page(request, 503, message, {"Retry-After": "5"})
        return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "5"})

    def run(work: Callable[[Session], T]) -> T:
        return db.run(work)

    def dispatch(sub_id: str, generation: int) -> None:
        hand_over(db, app.state.dispatcher, sub_id, generation)  # refused: queued, the sweeper hands it over

    # ---- health and metrics -------------------------------------------------------------------

    @app.get("/healthz", tags=["operations"])
    def healthz() -> dict[str, Any]:
        run(lambda s: s.execute(select(1)))
        return {"status": "ok", "mode": "embedded" if settings.embedded else "celery", "version": __version__}

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    def metrics() -> Response:
        return Response(generate_latest(metrics_registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/api/me", tags=["auth"])
    def me(principal: Who) -> dict[str, Any]:
        return {"kind": principal.kind, "name": principal.name}

    # ---- courses, assignments, roster ----------------------------------------------------------

    @app.post("/api/courses", status_code=201, tags=["courses"])
    def create_course(body: CourseIn, principal: StaffOnly) -> dict[str, Any]:
        return course_view(run(lambda s: ops.create_course(s, body, principal.name)))

    @app.get("/api/courses", tags=["courses"])
    def list_courses(principal: StaffOnly) -> list[dict[str, Any]]:
        return run(lambda s: [course_view(c) for c in s.scalars(select(Course).order_by(Course.slug))])

    @app.post("/api/courses/{course}/assignments", status_code=201, tags=["courses"])
    def create_assignment(course: Slug, body: AssignmentIn, principal: StaffOnly) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            c = ops.course_by_slug(s, course)
            return assignment_view(c, ops.create_assignment(s, c, body, principal.name))

        return run(work)

    @app.get("/api/courses/{course}/assignments", tags=["courses"])
    def list_assignments(course: Slug, principal: Who) -> list[dict[str, Any]]:
        def work(s: Session) -> list[dict[str, Any]]:
            c = ops.course_by_slug(s, course)
            require_course(principal, c.id)
            return [assignment_view(c, a) for a in s.scalars(select(Assignment).where(Assignment.course_id == c.id)
                                                             .order_by(Assignment.slug))]

        return run(work)

    @app.get("/api/courses/{course}/assignments/{assignment}", tags=["courses"])
    def get_assignment(course: Slug, assignment: Slug, principal: Who) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            c = ops.course_by_slug(s, course)
            require_course(principal, c.id)
            return assignment_view(c, ops.assignment_by_slug(s, c, assignment))

        return run(work)

    @app.patch("/api/courses/{course}/assignments/{assignment}", tags=["courses"])
    def update_assignment(course: Slug, assignment: Slug, body: AssignmentPatch, principal: StaffOnly) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            c = ops.course_by_slug(s, course)
            return assignment_view(c, ops.update_assignment(s, ops.assignment_by_slug(s, c, assignment), body,
                                                            principal.name))

        return run(work)

    @app.post("/api/courses/{course}/roster", tags=["courses"])
    async def import_roster(course: Slug, principal: StaffOnly, roster: Annotated[UploadFile, File()],
                            rotate: bool = False) -> dict[str, Any]:
        """Add the students of a roster CSV (the same columns as ``grader batch --roster``). New
        students get a credential, returned here once; ``rotate=true`` issues new ones to all."""
        raw = await roster.read(20 * 2**20 + 1)
        try:
            parsed = parse_roster(raw.decode("utf-8-sig"), source=roster.filename or "roster")
        except (RosterError, UnicodeDecodeError) as e:
            raise ops.Invalid(f"roster not usable: {e}") from None

        def work(s: Session) -> dict[str, Any]:
            issued, problems = ops.import_roster(s, ops.course_by_slug(s, course), parsed, principal.name,
                                                 rotate=rotate)
            return {"credentials": issued, "problems": problems, "students": len(parsed.entries)}

        return await run_in_threadpool(run, work)

    @app.get("/api/courses/{course}/students", tags=["courses"])
    def list_students(course: Slug, principal: StaffOnly) -> list[dict[str, str]]:
        def work(s: Session) -> list[dict[str, str]]:
            c = ops.course_by_slug(s, course)
            return [{"student_id": st.student_id, "name": st.name, "email": st.email}
                    for st in s.scalars(select(Student).where(Student.course_id == c.id).order_by(Student.student_id))]

        return run(work)

    # ---- submissions -----------------------------------------------------------------------------

    @app.post("/api/courses/{course}/assignments/{assignment}/submissions", status_code=202, tags=["submissions"])
    async def upload(course: Slug, assignment: Slug, principal: Who, request: Request,
                     file: Annotated[UploadFile, File(description=".ipynb notebook or jupytext percent .py")],
                     student_id: Annotated[str | None, Form(description="staff only: submit for this student")] = None,
                     ) -> JSONResponse:
        """Upload a submission: 202 and its id, once it is committed to the store. The same file
        from the same student again returns the same id (and does not count against the limit)."""
        view = await accept_upload(principal, course, assignment, request, file, student_id)
        return JSONResponse(view, status_code=202, headers={"Location": view["links"]["self"]})

    async def accept_upload(principal: Principal, course: str, assignment: str, request: Request, file: UploadFile,
                            student_id: str | None = None) -> dict[str, Any]:
        return await uploads.accept(run, dispatch, settings, principal, course, assignment, file, student_id)

    @app.get("/api/courses/{course}/assignments/{assignment}/submissions", tags=["submissions"])
    def list_submissions(course: Slug, assignment: Slug, principal: Who) -> list[dict[str, Any]]:
        """Staff: every roster student, by student id, with their latest upload (or ``status``
        ``no_submission`` and ``id`` null). A student: their own uploads, newest first."""
        def work(s: Session) -> list[dict[str, Any]]:
            c = ops.course_by_slug(s, course)
            require_course(principal, c.id)
            a = ops.assignment_by_slug(s, c, assignment)
            if principal.staff:
                uploaded = [status_view(sub) | {"student_id": st.student_id, "name": st.name}
                            for sub, st in ops.latest_submissions(s, a)]
                absent = [{"id": None, "student_id": st.student_id, "name": st.name, "status": "no_submission",
                           "final": True} for st in ops.students_without_upload(s, a)]
                return sorted(uploaded + absent, key=lambda row: row["student_id"])
            mine = s.scalars(select(Submission).where(Submission.assignment_id == a.id,
                                                      Submission.student_pk == principal.student_pk)
                             .order_by(Submission.submitted_at.desc()))
            return [status_view(sub) for sub in mine]

        return run(work)

    def load_status(principal: Principal, submission_id: str) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            sub = own_submission(s, principal, submission_id)
            return status_view(sub) | {"queue_place": ops.queue_place(s, sub)}

        return run(work)

    async def wait_status(principal: Principal, submission_id: str, wait_s: float, last: dict[str, Any] | None = None
                          ) -> dict[str, Any]:
        """The status, as soon as it is final or its status or queue place differs from ``last``'s,
        or after ``wait_s``."""
        deadline = time.monotonic() + min(wait_s, settings.long_poll_max_s)
        while True:
            event = waiters.register(submission_id)
            try:
                view = await run_in_threadpool(load_status, principal, submission_id)
                left = deadline - time.monotonic()
                moved = last is not None and (view["status"], view["queue_place"]) != (last["status"], last["queue_place"])
                if view["final"] or moved or left <= 0:
                    return view
                try:
                    await asyncio.wait_for(event.wait(), min(left, settings.poll_interval_s))
                except TimeoutError:
                    pass
            finally:
                waiters.unregister(submission_id, event)

    @app.get("/api/submissions/{submission_id}", tags=["submissions"])
    async def get_status(submission_id: SubmissionId, principal: Who,
                         wait: Annotated[float, Query(ge=0, le=600, description="long poll: wait up to this many "
                                                      "seconds for a final status")] = 0) -> dict[str, Any]:
        if wait <= 0:
            return await run_in_threadpool(load_status, principal, submission_id)
        with waiting.held(who_waits(principal)):
            return await wait_status(principal, submission_id, wait)

    @app.get("/api/submissions/{submission_id}/events", tags=["submissions"])
    async def events(submission_id: SubmissionId, principal: Who) -> StreamingResponse:
        """Server-sent events: one ``status`` event per change, until the status is final."""
        return await status_events(principal, submission_id)

    async def status_events(principal: Principal, submission_id: str) -> StreamingResponse:
        give_back = waiting.take(who_waits(principal))
        try:
            first = await run_in_threadpool(load_status, principal, submission_id)
        except BaseException:
            give_back()
            raise

        async def stream() -> AsyncIterator[str]:
            view = first
            yield f"event: status\ndata: {json.dumps(view)}\n\n"
            while not view["final"]:
                view = await wait_status(principal, submission_id, 15.0, last=view)
                yield f"event: status\ndata: {json.dumps(view)}\n\n"

        return HeldStream(stream(), give_back, media_type="text/event-stream", headers={"Cache-Control": "no-store"})

    @app.get("/api/submissions/{submission_id}/result", tags=["submissions"])
    def result(submission_id: SubmissionId, principal: Who) -> dict[str, Any]:
        """A student gets their own result filtered by the release policy; staff get everything."""
        def work(s: Session) -> dict[str, Any]:
            sub = own_submission(s, principal, submission_id)
            gradings, overrides = ops.history(s, sub)
            if principal.staff:
                return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)
            return student_result(sub, s.get_one(Assignment, sub.assignment_id), gradings, overrides, utcnow())

        return run(work)

    # ---- staff actions -----------------------------------------------------------------------------

    @app.post("/api/submissions/{submission_id}/regrade", status_code=202, tags=["staff"])
    def regrade(submission_id: SubmissionId, principal: StaffOnly) -> dict[str, Any]:
        return regrade_one(principal, submission_id)

    def regrade_one(principal: Principal, submission_id: str) -> dict[str, Any]:
        require_staff(principal)
        view = run(lambda s: status_view(ops.regrade(s, own_submission(s, principal, submission_id), principal.name)))
        dispatch(view["id"], view["generation"])
        return view

    @app.post("/api/courses/{course}/assignments/{assignment}/regrade", status_code=202, tags=["staff"])
    def regrade_all(course: Slug, assignment: Slug, principal: StaffOnly) -> dict[str, Any]:
        """Regrade each student's latest upload (after a rubric change); earlier results stay in
        the history."""
        return {"regrading": regrade_every(principal, course, assignment)}

    def regrade_every(principal: Principal, course: str, assignment: str) -> int:
        require_staff(principal)

        def work(s: Session) -> list[tuple[str, int]]:
            a = ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment)
            return [(sub.id, ops.regrade(s, sub, principal.name).generation) for sub, _ in ops.latest_submissions(s, a)]

        jobs = run(work)
        for sub_id, generation in jobs:
            dispatch(sub_id, generation)
        return len(jobs)

    @app.post("/api/submissions/{submission_id}/override", status_code=201, tags=["staff"])
    def override(submission_id: SubmissionId, body: OverrideIn, principal: StaffOnly) -> dict[str, Any]:
        def work(s: Session) -> dict[str, Any]:
            sub = own_submission(s, principal, submission_id)
            ops.add_override(s, sub, body.score, body.reason, principal.name)
            gradings, overrides = ops.history(s, sub)
            return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)

        return run(work)

    @app.delete("/api/submissions/{submission_id}/override", tags=["staff"])
    def remove_override(submission_id: SubmissionId, principal: StaffOnly) -> dict[str, Any]:
        """Take back the standing override: the automatic score counts again (404 when none stands)."""
        def work(s: Session) -> dict[str, Any]:
            sub = own_submission(s, principal, submission_id)
            if ops.remove_override(s, sub, principal.name) is None:
                raise ops.NotFound("this upload has no standing override")
            gradings, overrides = ops.history(s, sub)
            return staff_result(sub, s.get_one(Student, sub.student_pk), gradings, overrides)

        return run(work)

    @app.get("/api/courses/{course}/assignments/{assignment}/export/{fmt}", tags=["staff"])
    def export_gradebook(course: Slug, assignment: Slug, fmt: Slug, principal: StaffOnly, assignment_name: str = "",
                         canvas_assignment_id: Annotated[str, Query(pattern=r"^([1-9]\d{0,17})?$")] = "") -> Response:
        """A gradebook in any ``grader export`` format (gradescope: a zip of results.json files).
        Problems are listed in the ``X-Grader-Problems`` header (JSON)."""
        def work(s: Session) -> tuple[str, bytes, str, list[str]]:
            a = ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment)
            return export(s, a, fmt, assignment_name=assignment_name, canvas_assignment_id=canvas_assignment_id)

        name, content, media, problems = run(work)
        return Response(content, media_type=media, headers={
            "Content-Disposition": f'attachment; filename="{name}"',
            "X-Grader-Problems": json.dumps(problems, ensure_ascii=True)[:8000]})

    @app.get("/api/courses/{course}/assignments/{assignment}/stats", tags=["staff"])
    def stats(course: Slug, assignment: Slug, principal: StaffOnly) -> dict[str, Any]:
        return run(lambda s: check_stats(s, ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment)))

    @app.get("/api/audit", tags=["staff"])
    def audit_log(principal: StaffOnly, limit: Annotated[int, Query(ge=1, le=1000)] = 100) -> list[dict[str, Any]]:
        return run(lambda s: [{"at": a.at.isoformat(), "actor": a.actor, "action": a.action, "target": a.target,
                               "detail": a.detail}
                              for a in s.scalars(select(Audit).order_by(Audit.id.desc()).limit(limit))])

    mount_web(app, WebHooks(run=run, accept_upload=accept_upload, status_events=status_events,
                            regrade_one=regrade_one, regrade_every=regrade_every, lms_panel=passback_panel))
    return app

