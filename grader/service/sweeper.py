"""Hand over again what the graders lost, within seconds, without flooding the queue.

Every ``sweep_interval_s`` (default 2 s) the sweeper looks for three things, with cheap queries:

- a submission ``grading`` on a worker whose heartbeat stopped for ``worker_lost_s`` (killed,
  host lost), or on a worker for longer than ``pending_timeout_s`` (a job it lost while alive):
  it goes back to ``queued``, not handed over;
- a ``queued`` submission whose job the broker no longer holds (the broker restarted empty, the
  API died between its commit and its hand-over): the same, once two sweeps in a row miss it;
- a ``queued`` submission not handed over (the broker did not answer at upload, or one of the
  above): handed over now, so everything accepted during a broker outage goes at the first sweep
  after the broker answers again.

A job the broker holds is never sent twice, however long it waits: a deep queue is left alone.
Sending twice anyway would be harmless (a job whose result is stored returns without grading).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy import func, or_, select, update
from sqlalchemy.orm import Session

from ..results.database import Database
from ..results.tables import Submission, Worker, utcnow
from .dispatch import Dispatcher
from .jobs import unclaim

log = logging.getLogger("grader.service")
SETTLE_S = 10.0  # a job handed over this recently may still be on its way to the broker


def hand_over(db: Database, dispatcher: Dispatcher, submission_id: str, generation: int) -> bool:
    """Enqueue a committed submission; if the broker does not take it, mark it not handed over,
    so that the next sweep hands it over as soon as the broker answers."""
    if dispatcher.enqueue(submission_id, generation):
        return True
    try:
        db.run(partial(_set_enqueued, submission_id=submission_id, generation=generation, at=None))
    except Exception:  # the store is down too: the sweeper sees that the broker does not hold the job
        log.exception("submission %s: could not mark it as not handed over", submission_id)
    return False


def sweep(db: Database, dispatcher: Dispatcher, older_than_s: float) -> int:
    """Enqueue again every submission queued, or grading, for more than ``older_than_s`` seconds
    (the embedded mode's start, with 0: what was in the process when it last stopped)."""
    cutoff = utcnow() - timedelta(seconds=older_than_s)
    stale = db.run(lambda s: s.execute(select(Submission.id, Submission.generation).where(
        or_(Submission.status == "queued", Submission.status == "grading"),
        or_(Submission.enqueued_at.is_(None), Submission.enqueued_at <= cutoff))).all())
    handed = 0
    for submission_id, generation in stale:
        if not dispatcher.enqueue(submission_id, generation):
            break  # the broker is still down: try again at the next sweep
        db.run(partial(_set_enqueued, submission_id=submission_id, generation=generation, at=utcnow()))
        handed += 1
    if handed:
        log.warning("sweeper: enqueued %d submission(s) again that were pending for over %.0f s", handed, older_than_s)
    return handed


def _set_enqueued(session: Session, submission_id: str, generation: int, at: datetime | None,
                  was: datetime | bool | None = True) -> int:
    """Set ``enqueued_at``; with ``was`` (None or a time), only if it still is that value."""
    where = [Submission.id == submission_id, Submission.generation == generation]
    if was is None:
        where.append(Submission.enqueued_at.is_(None))
    elif not isinstance(was, bool):
        where.append(Submission.enqueued_at == was)
    result = session.execute(update(Submission).where(*where).values(enqueued_at=at))
    return int(result.rowcount)  # type: ignore[attr-defined]


def _unsent(session: Session) -> list[Any]:
    return list(session.execute(select(Submission.id, Submission.generation).where(
        Submission.status == "queued", Submission.enqueued_at.is_(None)).order_by(Submission.requested_at)).all())


def send_unsent(db: Database, dispatcher: Dispatcher, unsent: list[Any] | None = None) -> int:
    """Hand over every queued submission not handed over yet (``unsent``, if read already), oldest
    request first. Each is claimed (``enqueued_at`` set where it was NULL) before it is sent: two
    API replicas never both send it. Stops at the first the broker refuses (it is down: the next
    sweep tries again)."""
    if unsent is None:
        unsent = db.run(_unsent)
    handed = 0
    for submission_id, generation in unsent:
        if not db.run(partial(_set_enqueued, submission_id=submission_id, generation=generation, at=utcnow(),
                              was=None)):
            continue  # another replica took it, or it was graded meanwhile
        if not dispatcher.enqueue(submission_id, generation):
            db.run(partial(_set_enqueued, submission_id=submission_id, generation=generation, at=None))
            break
        handed += 1
    if handed:
        log.warning("sweeper: handed over %d submission(s) that were not (broker back, worker lost, job lost)", handed)
    return handed


def _lost_gradings(session: Session, lost_s: float, stuck_s: float) -> list[Any]:
    now = utcnow()
    lost, stuck = now - timedelta(seconds=lost_s), now - timedelta(seconds=stuck_s)
    return list(session.execute(
        select(Submission.id, Submission.generation, Submission.worker)
        .outerjoin(Worker, Worker.hostname == Submission.worker)
        .where(Submission.status == "grading",
               or_(Worker.hostname.is_(None), Worker.last_seen < lost, Submission.started_at < stuck))).all())


def requeue_lost_gradings(db: Database, lost_s: float, stuck_s: float, found: list[Any] | None = None) -> int:
    """Put back to ``queued`` (not handed over) every grading whose worker's heartbeat is older
    than ``lost_s`` (or missing), or that has been grading for longer than ``stuck_s`` (``found``:
    those gradings, if read already)."""
    requeued = 0
    for submission_id, generation, worker in found if found is not None else db.run(
            partial(_lost_gradings, lost_s=lost_s, stuck_s=stuck_s)):
        if db.run(partial(unclaim, submission_id=submission_id, generation=generation, worker=worker)):
            log.warning("submission %s: its worker %s is gone (no heartbeat for %.0f s) or lost it: graded again",
                        submission_id, worker or "?", lost_s)
            requeued += 1
    return requeued


class LostJobs:
    """Queued submissions handed over whose job the broker no longer holds. Asks the broker only
    when it holds fewer jobs than there are such submissions, and takes a job for lost only when
    two sweeps in a row miss it (a worker may be between taking a job and starting it)."""

    def __init__(self) -> None:
        self.suspects: set[tuple[str, int]] = set()

    @staticmethod
    def handed_over() -> tuple[Any, ...]:
        """Queued submissions handed over long enough ago to be in the broker by now."""
        settled = utcnow() - timedelta(seconds=SETTLE_S)
        return Submission.status == "queued", Submission.enqueued_at.is_not(None), Submission.enqueued_at < settled

    @classmethod
    def count(cls, session: Session) -> int:
        return session.scalar(select(func.count()).select_from(Submission).where(*cls.handed_over())) or 0

    def requeue(self, db: Database, dispatcher: Dispatcher, count: int | None = None) -> int:
        """(``count``: ``LostJobs.count``, if read already.)"""
        depth, held = getattr(dispatcher, "depth", None), getattr(dispatcher, "held", None)
        if depth is None or held is None:
            return 0
        handed_over = self.handed_over()
        if count is None:
            count = db.run(self.count)
        in_broker = depth() if count else 0
        if in_broker is None or in_broker >= count:
            self.suspects.clear()
            return 0
        jobs = held()
        if jobs is None:
            return 0
        rows = db.run(lambda s: s.execute(select(Submission.id, Submission.generation, Submission.enqueued_at)
                                          .where(*handed_over)).all())
        missing = {(sid, gen): at for sid, gen, at in rows if (sid, gen) not in jobs}
        confirmed = [(key, at) for key, at in missing.items() if key in self.suspects]
        self.suspects = set(missing) - {key for key, _ in confirmed}
        requeued = 0
        for (sid, gen), at in confirmed:
            requeued += db.run(partial(_set_enqueued, submission_id=sid, generation=gen, at=None, was=at))
        if requeued:
            log.warning("sweeper: the broker lost %d job(s) (restarted empty?): handing them over again", requeued)
        return requeued


class Sweeper:
    """The sweeps every ``interval_s`` seconds in a background thread, until ``stop``.

    Workers are judged lost only once the store has answered for ``worker_lost_s``: after a
    database outage, live workers first get the time to record their heartbeats again."""

    def __init__(self, db: Database, dispatcher: Dispatcher, interval_s: float, older_than_s: float,
                 worker_lost_s: float = 15.0) -> None:
        self.db, self.dispatcher, self.interval_s, self.older_than_s = db, dispatcher, interval_s, older_than_s
        self.worker_lost_s = worker_lost_s
        self.lost_jobs = LostJobs()
        self._healthy_since: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweeper")

    def start(self) -> None:
        self._thread.start()

    def sweep_once(self) -> None:
        """One sweep. What it looks for is read in one unit of work (a sweep that finds nothing,
        the usual one, costs one round of queries); only what it changed is read again."""
        now = time.monotonic()
        try:
            judge = self._healthy_since is not None and now - self._healthy_since >= self.worker_lost_s
            holds = hasattr(self.dispatcher, "held")

            def survey(s: Session) -> tuple[list[Any], int, list[Any]]:
                lost = _lost_gradings(s, self.worker_lost_s, self.older_than_s) if judge else []
                if not holds:  # a dispatcher that cannot say what it holds: re-send what waited too long
                    _forget_older(s, self.older_than_s)
                return lost, LostJobs.count(s) if holds else 0, _unsent(s)

            lost, handed_over, unsent = self.db.run(survey)
            if self._healthy_since is None:
                self._healthy_since = now
            changed = requeue_lost_gradings(self.db, self.worker_lost_s, self.older_than_s, found=lost) if lost else 0
            if holds:
                changed += self.lost_jobs.requeue(self.db, self.dispatcher, count=handed_over)
            send_unsent(self.db, self.dispatcher, None if changed else unsent)
        except Exception:
            self._healthy_since = None
            raise

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.sweep_once()
            except Exception:  # the database is down: the next sweep tries again
                log.exception("sweeper: this sweep failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


def _forget_older(session: Session, older_than_s: float) -> None:
    session.execute(update(Submission).where(
        Submission.status == "queued", Submission.enqueued_at <= utcnow() - timedelta(seconds=older_than_s))
        .values(enqueued_at=None))
