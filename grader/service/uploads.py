"""Reading uploads in the service: every step that reads an uploaded file's bytes (its notebook
JSON, a jupytext source, its cells shown on a page) runs in a forked intake worker bounded in time
and memory (``grader.intake``), never in the API process, as SECURITY.md requires.

The API process has a few reader threads (``READERS``), each with its own warm worker, so at most
that many uploads are parsed at once however many arrive. At most ``BACKLOG`` uploads, holding at
most ``BACKLOG_BYTES`` between them, wait or are being read (a class uploading at the same minute
fits); beyond that an upload is answered 503 with ``Retry-After`` before anything of it is parsed.
"""

from __future__ import annotations

import asyncio
import hashlib
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePath
from typing import Any

from fastapi import UploadFile
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import select
from sqlalchemy.orm import Session

from .. import models
from ..errors import Busy, Invalid, SubmissionError, TooLarge
from ..intake import load_bounded
from ..load import LoadLimits
from ..models import shown
from ..results.names import is_safe
from ..results.tables import Assignment, Course, Student, Submission
from . import ops
from .auth import Principal, require_course
from .settings import ServiceSettings
from .views import status_view

READERS = 2
BACKLOG = 128
BACKLOG_BYTES = 64 * 1024 * 1024
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pending = 0
_pending_bytes = 0


def stored_name(file_name: str) -> str:
    """The file name to store: the student's if it is a safe name, else ``submission<suffix>``."""
    suffix = PurePath(file_name).suffix.lower()
    return file_name if is_safe(file_name) and len(file_name) <= 128 else f"submission{suffix}"


def check_size(stored: str, content: bytes, limits: LoadLimits) -> None:
    if len(content) > limits.max_bytes:
        raise TooLarge(f"{shown(stored)}: larger than the {limits.max_bytes // 1024} KiB limit; clear the "
                      "notebook's outputs and upload it again")


async def validate_upload(file_name: str, content: bytes, limits: LoadLimits) -> str:
    """Refuse what ``grader grade`` would refuse (type, size, encoding, cell count, notebook schema),
    read in a bounded worker: parsing only, nothing runs. Returns the file name to store."""
    stored = stored_name(file_name)
    check_size(stored, content, limits)
    try:
        await asyncio.wrap_future(_submit(stored, content, limits))
    except SubmissionError as e:
        raise Invalid(str(e)) from None
    return stored


def load_cells(file_name: str, content: bytes, limits: LoadLimits) -> models.Submission:
    """The upload as ``grader grade`` reads it, from any thread (it waits for a reader)."""
    return _submit(stored_name(file_name), content, limits).result()


def _submit(stored: str, content: bytes, limits: LoadLimits) -> Future[models.Submission]:
    global _pool, _pending, _pending_bytes
    size = len(content)
    with _lock:
        if _pending and (_pending >= BACKLOG or _pending_bytes + size > BACKLOG_BYTES):
            raise Busy("the service is busy reading other uploads; send yours again in a few seconds",
                       retry_after=5)
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=READERS, thread_name_prefix="grader-intake")
        _pending += 1
        _pending_bytes += size
        future = _pool.submit(_read, stored, content, limits)
    future.add_done_callback(lambda _future: _done(size))
    return future


def _done(size: int) -> None:
    global _pending, _pending_bytes
    with _lock:
        _pending -= 1
        _pending_bytes -= size


def _read(stored: str, content: bytes, limits: LoadLimits) -> models.Submission:
    with tempfile.TemporaryDirectory(prefix="grader-upload-") as folder:
        path = Path(folder) / stored
        path.write_bytes(content)
        return load_bounded(path, limits)


# ---- accepting an upload ------------------------------------------------------------------------


async def accept(run: Callable[[Callable[[Session], Any]], Any], dispatch: Callable[[str, int], None],
                 settings: ServiceSettings, principal: Principal, course: str, assignment: str, file: UploadFile,
                 student_id: str | None = None) -> dict[str, Any]:
    """Check, read, commit, then enqueue an upload (the API's and the web pages' one way in).

    Everything that costs less comes first: the size; then, in the store, an earlier upload of the
    same file (returned as it is), the rate limit and the queue, which reserve the upload's place in
    the limit; only then is the file read, in a bounded worker. A file refused there counts against
    the rate limit, and so does one still being read."""
    limits = LoadLimits(max_bytes=settings.max_upload_bytes)
    queue = ops.Queue(settings.queue_per_assignment, settings.queue_total)
    content = await file.read(limits.max_bytes + 1)
    name = stored_name(file.filename or "submission.ipynb")
    check_size(name, content, limits)
    sha = hashlib.sha256(content).hexdigest()

    target: tuple[Assignment, Student] | None = None

    def before(s: Session) -> dict[str, Any] | int:
        nonlocal target
        target = _target(s, principal, course, assignment, student_id)
        found = ops.check_upload(s, *target, sha, queue)
        return found if isinstance(found, int) else _view(found, False, ops.queue_place(s, found))

    earlier: dict[str, Any] | int = await run_in_threadpool(run, before)
    if not isinstance(earlier, int):
        return earlier
    attempt = earlier  # counts against the rate limit from now on: submit() or refuse_upload() settles it
    assert target is not None
    a, student = target  # read already (the session keeps what it loaded); submit() re-counts under its lock
    try:
        await validate_upload(name, content, limits)
    except Invalid as e:
        reason = str(e)
        await run_in_threadpool(run, lambda s: ops.refuse_upload(s, a, student, reason, attempt))
        raise
    except BaseException:  # not read (the readers were busy, the request went away): not the student's
        await run_in_threadpool(run, lambda s: ops.release_upload(s, attempt))
        raise

    def work(s: Session) -> tuple[dict[str, Any], bool]:
        done = ops.submit(s, a, student, name, content, queue, attempt)
        return _view(*done), done.created

    def commit_then_send() -> dict[str, Any]:
        view: dict[str, Any]
        view, created = run(work)  # committed here, before it is enqueued
        if created:
            dispatch(view["id"], view["generation"])
        return view

    return await run_in_threadpool(commit_then_send)


def _view(sub: Submission, created: bool, queue_place: int | None) -> dict[str, Any]:
    return status_view(sub) | {"created": created, "queue_place": queue_place}


def _target(session: Session, who: Principal, course: str, assignment: str, student_id: str | None
            ) -> tuple[Assignment, Student]:
    """The assignment and the submitting student (course and assignment in one query)."""
    found = session.execute(select(Course, Assignment).join(Assignment, Assignment.course_id == Course.id)
                            .where(Course.slug == course, Assignment.slug == assignment)).first()
    if found is None:  # one of them is missing: the lookups one by one say which, as they always did
        c = ops.course_by_slug(session, course)
        require_course(who, c.id)
        return ops.assignment_by_slug(session, c, assignment), _submitter(session, who, c, student_id)
    c, a = found
    require_course(who, c.id)
    return a, _submitter(session, who, c, student_id)


def _submitter(session: Session, who: Principal, course: Course, student_id: str | None) -> Student:
    if not who.staff:
        if student_id not in (None, who.name):
            raise ops.NotFound("students submit only for themselves")
        return session.get_one(Student, who.student_pk)
    if student_id is None:
        raise ops.Invalid("staff submitting must name the student: form field student_id")
    student = session.scalar(select(Student).where(Student.course_id == course.id, Student.student_id == student_id))
    if student is None:
        raise ops.NotFound(f"no student {student_id!r} in course {course.slug!r}")
    return student


def shutdown() -> None:
    """End the reader threads, and so their workers (the next upload starts new ones)."""
    global _pool
    with _lock:
        pool, _pool = _pool, None
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)
