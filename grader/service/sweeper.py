"""Re-enqueue what has been pending too long: a job lost with a broker, a worker that died with
its job unacknowledged, or (embedded mode) work in flight when the process stopped.

Enqueuing twice is harmless: a job whose result is stored returns without grading."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from functools import partial

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from .database import Database
from .dispatch import Dispatcher
from .tables import Submission, utcnow

log = logging.getLogger("grader.service")


def sweep(db: Database, dispatcher: Dispatcher, older_than_s: float) -> int:
    """Enqueue again every submission queued, or grading, for more than ``older_than_s`` seconds."""
    cutoff = utcnow() - timedelta(seconds=older_than_s)
    stale = db.run(lambda s: s.execute(select(Submission.id, Submission.generation).where(
        or_(Submission.status == "queued", Submission.status == "grading"),
        or_(Submission.enqueued_at.is_(None), Submission.enqueued_at <= cutoff))).all())
    handed = 0
    for submission_id, generation in stale:
        if not dispatcher.enqueue(submission_id, generation):
            break  # the broker is still down: try again at the next sweep
        db.run(partial(_mark_enqueued, submission_id=submission_id, generation=generation))
        handed += 1
    if handed:
        log.warning("sweeper: enqueued %d submission(s) again that were pending for over %.0f s", handed, older_than_s)
    return handed


def _mark_enqueued(session: Session, submission_id: str, generation: int) -> None:
    session.execute(update(Submission).where(Submission.id == submission_id, Submission.generation == generation)
                    .values(enqueued_at=utcnow()))


class Sweeper:
    """``sweep`` every ``interval_s`` seconds in a background thread, until ``stop``."""

    def __init__(self, db: Database, dispatcher: Dispatcher, interval_s: float, older_than_s: float) -> None:
        self.db, self.dispatcher, self.interval_s, self.older_than_s = db, dispatcher, interval_s, older_than_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sweeper")

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                sweep(self.db, self.dispatcher, self.older_than_s)
            except Exception:  # the database is down: the next sweep tries again
                log.exception("sweeper: this sweep failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
