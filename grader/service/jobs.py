"""Grade one submission and commit its result exactly once.

A job is (submission id, generation). It may be delivered more than once (a worker killed after
grading but before acknowledging, a sweeper re-enqueueing, two workers racing): the UNIQUE
(submission, generation) constraint on ``gradings`` keeps exactly one result, and a job whose
result exists, or whose generation a regrade has superseded, returns without grading.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import exists, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ..errors import GraderError, SubmissionError
from ..models import GradeReport, shown
from ..results.database import Database
from ..results.tables import Assignment, Grading, Submission, Worker, utcnow
from ..rubric import Rubric
from .grading import grade_file
from .ops import seed_secret
from .views import status_view

log = logging.getLogger("grader.service")
Outcome = Literal["graded", "duplicate", "superseded", "missing", "abandoned"]


@dataclass(frozen=True)
class Claimed:
    """What a worker needs from the store to grade a submission."""

    content: bytes
    file_name: str
    rubric: Rubric
    requested_at: datetime
    seed_secret: bytes | None  # the course's (grader.secret); None: refused (grading then says why)


@dataclass(frozen=True)
class Verdict:
    status: Literal["graded", "invalid", "failed_to_grade"]
    reason: str = ""
    report: GradeReport | None = None


class Slots:
    """The sandbox gradings one ``grader worker`` runs at once (its ``--concurrency``), while it
    holds one job more: claimed (``grading`` on this worker, so that the sweeper hands it over if
    the worker dies) and waiting for a slot. When a grading ends, the next starts at once; storing
    the result, acknowledging the job and receiving the next one happen during the next grading,
    not between two. On shutdown (``close``) a job still waiting gives its claim back."""

    def __init__(self, count: int) -> None:
        self._free = threading.BoundedSemaphore(count)
        self._closing = threading.Event()

    def take(self) -> bool:
        """Wait for a free slot; False if the worker began shutting down first."""
        while not self._free.acquire(timeout=0.5):
            if self._closing.is_set():
                return False
        return True

    def give(self) -> None:
        self._free.release()

    def close(self) -> None:
        self._closing.set()


def run_job(db: Database, submission_id: str, generation: int, *, worker: str, backend: str, official: bool,
            abandoned: threading.Event | None = None, slots: Slots | None = None,
            on_started: Callable[[str], None] | None = None,
            on_stored: Callable[[dict[str, Any]], None] | None = None) -> Outcome:
    """Grade ``submission_id`` for ``generation`` unless that is already done or superseded.
    ``on_started(submission_id)`` is called once its ``grading`` status is committed, and
    ``on_stored(view)`` once its result is, with the submission's status view as the store now has
    it (so that the live statuses say so at once, the last without reading the store again). Once
    ``abandoned`` is set (a shutdown past its grace ended the sandboxes), nothing is stored: the
    submission stays ``grading`` for the next start. With ``slots``, the sandbox waits for one of
    them; a job that gets none (shutdown) goes back to ``queued``, for the sweeper to hand over."""
    claimed = db.run(lambda s: _claim(s, submission_id, generation, worker))
    if isinstance(claimed, str):
        return claimed  # type: ignore[return-value]
    if on_started is not None:
        on_started(submission_id)
    if slots is not None and not slots.take():
        db.run(lambda s: unclaim(s, submission_id, generation, worker))
        log.info("submission %s: shutting down before its grading began: back to the queue", submission_id)
        return "abandoned"
    try:
        verdict = _grade(claimed, backend, official)
    finally:
        if slots is not None:
            slots.give()
    if abandoned is not None and abandoned.is_set():
        log.info("submission %s: grading abandoned at shutdown, left for the next start", submission_id)
        return "abandoned"
    try:
        counted, view = db.run(lambda s: _commit(s, submission_id, generation, worker, claimed, verdict))
    except IntegrityError:
        log.info("submission %s generation %d: another worker stored its result first", submission_id, generation)
        return "duplicate"
    if view is not None and on_stored is not None:
        on_stored(view)
    if not counted:  # the worker has no row yet (its first heartbeat is still to come)
        beat(db, worker, backend, graded=1)
    return "graded"


def _claim(session: Session, submission_id: str, generation: int, worker: str) -> Claimed | str:
    """Mark the submission ``grading`` and read what grading it needs, in one statement when it is
    still to be graded (the common case: the time between two gradings is the worker's idle time);
    else say why not."""
    done = exists().where(Grading.submission_id == submission_id, Grading.generation == generation)
    row = session.execute(
        update(Submission).where(Submission.id == submission_id, Submission.generation == generation, ~done)
        .values(status="grading", started_at=utcnow(), worker=worker)
        .returning(Submission.content, Submission.file_name, Submission.requested_at,
                   select(Assignment.rubric_json).where(Assignment.id == Submission.assignment_id)
                   .scalar_subquery())).first()
    if row is None:
        now = session.scalar(select(Submission.generation).where(Submission.id == submission_id))
        return "missing" if now is None else "superseded" if now != generation else "duplicate"
    try:
        key: bytes | None = seed_secret(session)
    except GraderError:  # GRADER_SEED_SECRET is the public default: the grading refuses, with the fix
        key = None
    content, file_name, requested_at, rubric_json = row
    return Claimed(content, file_name, _rubric(rubric_json), requested_at, key)


@lru_cache(maxsize=64)
def _rubric(rubric_json: str) -> Rubric:
    """A stored rubric, parsed once per worker (a Rubric is immutable)."""
    return Rubric.model_validate_json(rubric_json)


def _grade(claimed: Claimed, backend: str, official: bool) -> Verdict:
    folder = Path(tempfile.mkdtemp(prefix="grader-service-"))
    try:
        path = folder / claimed.file_name
        path.write_bytes(claimed.content)
        try:
            report = grade_file(path, claimed.rubric, backend=backend, official=official,
                                seed_secret=claimed.seed_secret)
        except SubmissionError as e:
            return Verdict("invalid", shown(str(e)))
        except GraderError as e:
            return Verdict("failed_to_grade", shown(str(e)))
        except Exception as e:  # a grader bug is flagged for staff, never scored 0
            log.exception("grading failed")
            return Verdict("failed_to_grade", f"internal grader error, please report it: {type(e).__name__}: "
                                              f"{shown(str(e)[:300])}")
        return Verdict("graded", report=report)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _commit(session: Session, submission_id: str, generation: int, worker: str, claimed: Claimed,
            verdict: Verdict) -> tuple[bool, dict[str, Any] | None]:
    """Store the verdict, and count it for the worker (with its heartbeat) in the same transaction:
    False if the worker has no row to count it on; and the submission's status view as the store
    now has it (None if a regrade superseded this generation meanwhile)."""
    now = utcnow()
    report = verdict.report
    session.add(Grading(
        submission_id=submission_id, generation=generation, status=verdict.status, reason=verdict.reason,
        score=report.score if report else None, max_score=report.max_score if report else None,
        report=report.model_dump_json() if report else None, rubric_hash=claimed.rubric.sha256, worker=worker,
        requested_at=claimed.requested_at, finished_at=now,
        latency_s=max(0.0, (now - claimed.requested_at).total_seconds()),
    ))
    session.flush()  # the UNIQUE (submission, generation) check happens here, before anything else changes
    row = session.execute(update(Submission).where(Submission.id == submission_id, Submission.generation == generation)
                          .values(status=verdict.status, finished_at=now).returning(*VIEWED)).first()
    counted = session.execute(update(Worker).where(Worker.hostname == worker)
                              .values(last_seen=now, graded=Worker.graded + 1))
    view = status_view(Submission(**row._asdict())) if row is not None else None
    return bool(counted.rowcount), view  # type: ignore[attr-defined]


# what ``views.status_view`` shows of a submission (not its content), as an UPDATE returns it
VIEWED = (Submission.id, Submission.status, Submission.generation, Submission.file_name, Submission.sha256,
          Submission.created_at, Submission.submitted_at, Submission.finished_at)


def unclaim(session: Session, submission_id: str, generation: int, worker: str) -> int:
    """Put a submission this worker claimed back to ``queued``, not handed over (the sweeper hands
    it over at its next sweep)."""
    result = session.execute(update(Submission).where(
        Submission.id == submission_id, Submission.generation == generation, Submission.status == "grading",
        Submission.worker == worker).values(status="queued", worker="", started_at=None, enqueued_at=None))
    return int(result.rowcount)  # type: ignore[attr-defined]


def requeue_grading_of(session: Session, worker: str) -> int:
    """A worker starting (``worker`` its name): what its previous run left in ``grading`` (killed,
    then restarted sooner than its heartbeat would tell) is graded by no one. It goes back to
    ``queued``, not handed over: the API's sweeper hands it over at its next sweep."""
    result = session.execute(update(Submission).where(Submission.status == "grading", Submission.worker == worker)
                             .values(status="queued", worker="", started_at=None, enqueued_at=None))
    return int(result.rowcount)  # type: ignore[attr-defined]


def beat(db: Database, hostname: str, backend: str, graded: int = 0) -> None:
    """Record that worker ``hostname`` is alive, and how many more it graded (for /metrics)."""

    def record(session: Session) -> None:
        changed = session.execute(update(Worker).where(Worker.hostname == hostname).values(
            last_seen=utcnow(), backend=backend, graded=Worker.graded + graded))
        if not changed.rowcount:  # type: ignore[attr-defined]
            session.add(Worker(hostname=hostname, backend=backend, graded=graded, last_seen=utcnow()))

    try:
        db.run(record)
    except IntegrityError:  # two threads of one host added its row at once: the other one's counts
        db.run(record)


class Heartbeat:
    """``beat`` every ``interval_s`` in a background thread, so an idle worker is still seen, and a
    dead one is noticed (by the sweeper) a few intervals after its death."""

    def __init__(self, db: Database, hostname: str, backend: str, interval_s: float = 5.0) -> None:
        self.db, self.hostname, self.backend, self.interval_s = db, hostname, backend, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="heartbeat")

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                beat(self.db, self.hostname, self.backend)
            except Exception as e:  # the database is down: the next beat will tell
                log.warning("heartbeat not recorded: %s", e)
            self._stop.wait(self.interval_s)

    def stop(self) -> None:
        self._stop.set()
