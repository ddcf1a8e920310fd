"""The application: its state, its lifespan (migrations, graders, the sweeper), its error answers,
and its routers. A route lives in the router of its resource: the API's in ``api/`` (one module
per resource), the pages' in ``web/`` (sign-in, student pages, staff pages, course setup), LTI's in
``lti/routes.py``; what they share (who is asking, CSRF, the app's state) in ``deps``. Every
database unit of work runs through ``Database.run`` (retried on restarts)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import __version__
from ..results.database import Database, StoreUnavailable
from ..results.tables import Staff
from . import ops, uploads
from .api import ROUTERS
from .dispatch import CeleryDispatcher, Dispatcher, LocalPool
from .limits import BodyLimit, Waiting, streams_cap, token_checker
from .lti.ags import passback_panel
from .lti.routes import router as lti_router
from .metrics import registry
from .notify import Subscriber, Waiters
from .settings import ServiceSettings
from .sweeper import Sweeper, sweep
from .web.pages import error_page, is_page
from .web.routes import mount_web


def bootstrap_staff(db: Database) -> str | None:
    """On first start (no staff yet): the first staff credential, to be printed once."""
    def first(session: Session) -> str | None:
        if session.scalar(select(Staff.id).limit(1)) is not None:
            return None
        return ops.add_staff(session, "admin")

    return db.run(first)


def create_app(settings: ServiceSettings, *, dispatcher: Dispatcher | None = None,
               announce: Callable[[str], None] = print) -> FastAPI:
    """The application. ``dispatcher`` defaults to the in-process pool (embedded) or Celery."""
    db = Database(settings.database_url)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with started(app, settings, dispatcher, announce):
            yield

    app = FastAPI(title="TinyTorch grading service", version=__version__, lifespan=lifespan)
    state = app.state
    state.db, state.settings = db, settings
    state.waiters = Waiters(started_in=lambda sid: db.run(lambda s: ops.started_in(s, sid)))
    total = streams_cap(settings.streams_total)
    if total < settings.streams_total:
        announce(f"warning: GRADER_STREAMS_TOTAL {settings.streams_total} lowered to {total}, half the open "
                 "files this process may hold (raise its limit: LimitNOFILE= in systemd, ulimit -n)")
    state.waiting = Waiting(settings.streams_per_student, total)
    state.metrics, state.lms_panel = registry(db), passback_panel
    app.add_middleware(BodyLimit, settings=settings, signed_in=token_checker(db))
    for kind, handler in ERRORS.items():
        app.add_exception_handler(kind, handler)
    app.include_router(lti_router)
    for router in ROUTERS:
        app.include_router(router)
    mount_web(app)
    return app


@asynccontextmanager
async def started(app: FastAPI, settings: ServiceSettings, dispatcher: Dispatcher | None,
                  announce: Callable[[str], None]) -> AsyncIterator[None]:
    """The store migrated, the first staff credential announced, the graders, the announcements'
    subscriber, the sweeper and the waiters' watch started; at the end, all stopped (the embedded pool finishes its
    gradings in progress first)."""
    db: Database = app.state.db
    waiters: Waiters = app.state.waiters
    waiters.loop = asyncio.get_running_loop()
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    await run_in_threadpool(db.migrate)
    token = await run_in_threadpool(bootstrap_staff, db)
    if token is not None:
        announce(f"staff sign-in (shown once, keep it safe): Authorization: Bearer {token}")
    chosen = dispatcher or (LocalPool(db, settings, on_change=waiters.notify) if settings.embedded
                            else CeleryDispatcher(settings))
    app.state.dispatcher = chosen
    sweeper = Sweeper(db, chosen, settings.sweep_interval_s, settings.pending_timeout_s, settings.worker_lost_s)
    subscriber = None if settings.embedded else Subscriber(settings.broker, waiters.notify)
    if subscriber is None:  # embedded: what was queued or in progress when the last run stopped
        await run_in_threadpool(sweep, db, chosen, 0.0)
    else:
        subscriber.start()
    sweeper.start()
    watch = asyncio.create_task(waiters.watch(lambda ids: db.run(lambda s: ops.statuses(s, ids)),
                                              settings.poll_interval_s))
    try:
        yield
    finally:
        watch.cancel()
        sweeper.stop()
        if subscriber is not None:
            subscriber.stop()
        await run_in_threadpool(chosen.close)  # the embedded pool finishes its work first
        await run_in_threadpool(uploads.shutdown)
        db.dispose()


# ---- error answers: JSON for the API and scripts, a page for browsers ---------------------------------


async def service_error(request: Request, e: Exception) -> Response:
    assert isinstance(e, ops.ServiceError)
    headers = {"Retry-After": str(e.retry_after)} if e.retry_after is not None else None
    if is_page(request):
        return error_page(request, e.status, str(e), headers)
    return JSONResponse({"detail": str(e)}, status_code=e.status, headers=headers)


async def invalid_request(request: Request, e: Exception) -> Response:
    """422 with each problem's place and message, never the input echoed back (it may be large
    or someone else's); a page for browsers."""
    assert isinstance(e, RequestValidationError)
    problems = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in e.errors()[:20]]
    if is_page(request):
        said = "; ".join(f"{'.'.join(str(x) for x in p['loc'][1:]) or 'request'}: {p['msg']}" for p in problems)
        return error_page(request, 400, f"The form sent something this page cannot take ({said}). Go back, "
                                        f"reload the page and try again.")
    return JSONResponse({"detail": problems}, status_code=422)


async def store_down(request: Request, e: Exception) -> Response:
    message = f"the database is unavailable; try again shortly ({e})"
    if is_page(request):
        return error_page(request, 503, message, {"Retry-After": "5"})
    return JSONResponse({"detail": message}, status_code=503, headers={"Retry-After": "5"})


ERRORS = {ops.ServiceError: service_error, RequestValidationError: invalid_request, StoreUnavailable: store_down}

