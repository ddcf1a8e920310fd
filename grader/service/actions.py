"""What the API's routes and the pages' routes both do that needs more than one unit of work on
the store: accept an upload (then hand it to the graders), regrade, and follow a submission's
status live (one read, a long poll, an event stream, woken by ``notify.Waiters``). Each takes the
request, and reaches the app's state through ``deps``."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from sqlalchemy.orm import Session

from . import deps, ops, uploads
from .auth import Principal, own_submission, require_staff
from .limits import HeldStream
from .views import status_view


async def accept_upload(request: Request, principal: Principal, course: str, assignment: str, file: UploadFile,
                        student_id: str | None = None) -> dict[str, Any]:
    """The upload committed to the store (then handed over), as its status view."""
    return await uploads.accept(deps.runner(request), lambda sid, generation: deps.dispatch(request, sid, generation),
                                deps.settings(request), principal, course, assignment, file, student_id)


def regrade_one(request: Request, principal: Principal, submission_id: str) -> dict[str, Any]:
    require_staff(principal)
    view = deps.run(request, lambda s: status_view(ops.regrade(s, own_submission(s, principal, submission_id),
                                                               principal.name)))
    deps.dispatch(request, view["id"], view["generation"])
    return view


def regrade_every(request: Request, principal: Principal, course: str, assignment: str) -> int:
    """Regrade each student's latest upload; how many."""
    require_staff(principal)

    def work(s: Session) -> list[tuple[str, int]]:
        a = ops.assignment_by_slug(s, ops.course_by_slug(s, course), assignment)
        return [(sub.id, ops.regrade(s, sub, principal.name).generation) for sub, _ in ops.latest_submissions(s, a)]

    jobs = deps.run(request, work)
    for sub_id, generation in jobs:
        deps.dispatch(request, sub_id, generation)
    return len(jobs)


# ---- live status -------------------------------------------------------------------------------------


def load_status(request: Request, principal: Principal, submission_id: str) -> dict[str, Any]:
    return _read_status(request, principal, submission_id)[0]


def signed_in_status(request: Request, token: str, submission_id: str,
                     place: bool = True) -> tuple[Principal, dict[str, Any]]:
    """The request signed in (its bearer ``token``) and the status read, in one transaction; its
    queue place too unless not ``place`` (a long poll that will wait: it answers a later read)."""
    def work(s: Session) -> tuple[Principal, dict[str, Any]]:
        principal = deps.token_principal(s, request, token)
        sub = own_submission(s, principal, submission_id)
        view = status_view(sub)
        return principal, view | {"queue_place": ops.queue_place(s, sub)} if place or view["final"] else view

    return deps.run(request, work)


def _read_status(request: Request, principal: Principal, submission_id: str) -> tuple[dict[str, Any], int]:
    """The status view, with the submission's assignment (whose queue an event stream follows)."""
    def work(s: Session) -> tuple[dict[str, Any], int]:
        sub = own_submission(s, principal, submission_id)
        return status_view(sub) | {"queue_place": ops.queue_place(s, sub)}, sub.assignment_id

    return deps.run(request, work)


async def wait_status(request: Request, principal: Principal, submission_id: str, wait_s: float,
                      last: dict[str, Any] | None = None, assignment: int | None = None,
                      first: tuple[asyncio.Event, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The status, as soon as it is final or its status or queue place differs from ``last``'s,
    or after ``wait_s``. A grading that ends wakes the wait (``notify``), one that starts only when
    there is a ``last`` to differ from (a long poll wants the final status), and so, for a
    queued ``last`` of ``assignment`` (an event stream), does a grading of that assignment that
    starts (its place moved); the store is read again only then. The slow fallback for what no
    announcement told: ``Waiters.watch``, one read for every waiter each ``poll_interval_s``; an
    event stream also re-reads its place that often. ``first``: the event registered before the
    caller's own first read, and what that read gave (the wait then starts without reading; without
    a queue place, it is read again should the wait end at once). A grading that ended and told
    its final status (``Waiters.ended_view``) answers without a read."""
    settings, waiters = deps.settings(request), deps.waiters(request)
    deadline = time.monotonic() + min(wait_s, settings.long_poll_max_s)
    follows = assignment if last is not None and last["status"] == "queued" else None
    view: dict[str, Any] | None = None
    told: dict[str, Any] | None = None
    while True:
        if first is not None:
            (event, view), first = first, None
        else:
            event = waiters.register(submission_id, follows=follows, final_only=last is None)
            view, told = (told | {"queue_place": None}) if told is not None else None, None
        try:
            left = deadline - time.monotonic()
            if view is None or (left <= 0 and "queue_place" not in view):
                view = await run_in_threadpool(load_status, request, principal, submission_id)
                left = deadline - time.monotonic()
            moved = last is not None and (view["status"], view["queue_place"]) != (last["status"], last["queue_place"])
            if view["final"] or moved or left <= 0:
                return view
            waiters.seen(submission_id, event, (view["status"], view["generation"]))
            try:
                await asyncio.wait_for(event.wait(), left if last is None else min(left, settings.poll_interval_s))
            except TimeoutError:
                pass
            told = waiters.ended_view(submission_id, view["generation"])
        finally:
            waiters.unregister(submission_id, event)
            view = None


async def long_poll(request: Request, token: str, submission_id: str, wait_s: float) -> dict[str, Any]:
    """The status once final, or after ``wait_s`` (one of the person's waiting places held while it
    waits). The first read also signs the request in; its event is registered before that read, so
    a grading that ends in between is not missed."""
    waiters = deps.waiters(request)
    event = waiters.register(submission_id, final_only=True)
    give_back: Callable[[], None] | None = None
    try:
        principal, view = await run_in_threadpool(signed_in_status, request, token, submission_id, wait_s <= 0)
        if view["final"]:
            return view
        give_back = deps.take_place(request, principal)
        return await wait_status(request, principal, submission_id, wait_s, first=(event, view))
    finally:
        waiters.unregister(submission_id, event)  # once more, if wait_status did: nothing happens
        if give_back is not None:
            give_back()


async def status_events(request: Request, principal: Principal, submission_id: str) -> StreamingResponse:
    """Server-sent events: one ``status`` event per change, until the status is final."""
    give_back = deps.take_place(request, principal)
    try:
        first, assignment = await run_in_threadpool(_read_status, request, principal, submission_id)
    except BaseException:
        give_back()
        raise

    async def stream() -> AsyncIterator[str]:
        view = first
        yield f"event: status\ndata: {json.dumps(view)}\n\n"
        while not view["final"]:
            view = await wait_status(request, principal, submission_id, 15.0, last=view, assignment=assignment)
            yield f"event: status\ndata: {json.dumps(view)}\n\n"

    return HeldStream(stream(), give_back, media_type="text/event-stream", headers={"Cache-Control": "no-store"})

