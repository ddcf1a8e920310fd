"""Handing a committed submission to the graders: the embedded in-process pool, or Celery.

A submission is always committed before it is handed over, so a hand-over that fails (broker
down) loses nothing: the submission stays ``queued`` and the sweeper hands it over again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .database import Database
from .jobs import Heartbeat, run_job
from .settings import Settings

log = logging.getLogger("grader.service")


class Dispatcher(Protocol):
    def enqueue(self, submission_id: str, generation: int) -> bool:
        """Hand the job over; False if it could not be (it stays queued for the sweeper)."""

    def close(self) -> None: ...


class LocalPool:
    """The embedded mode's graders: ``settings.workers`` threads in the API process, each with its
    own warm sandbox. ``on_done(submission_id)`` is called after each job's result is committed."""

    def __init__(self, db: Database, settings: Settings, on_done: Callable[[str], None] | None = None) -> None:
        self.db, self.settings, self.on_done = db, settings, on_done
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.workers), thread_name_prefix="grade")
        self._closed = threading.Event()
        self._heartbeat = Heartbeat(db, settings.hostname, settings.backend).start()

    def enqueue(self, submission_id: str, generation: int) -> bool:
        if self._closed.is_set():
            return False
        self._pool.submit(self._run, submission_id, generation)
        return True

    def _run(self, submission_id: str, generation: int) -> None:
        s = self.settings
        try:
            run_job(self.db, submission_id, generation, worker=s.hostname, backend=s.backend, official=s.official)
        except Exception:  # the store is down past its retries: the sweeper hands the job over again
            log.exception("submission %s: grading could not be recorded", submission_id)
        finally:
            if self.on_done is not None:
                self.on_done(submission_id)

    def close(self) -> None:
        """Stop taking work, and finish what was handed over (graceful shutdown drains the pool)."""
        self._closed.set()
        self._pool.shutdown(wait=True)
        self._heartbeat.stop()
        from .grading import close_graders

        close_graders()


class CeleryDispatcher:
    """The scaled-out mode: a Celery task on the Redis broker, picked up by ``grader worker``s."""

    def __init__(self, settings: Settings) -> None:
        from .tasks import make_celery

        self.app: Any = make_celery(settings)

    def enqueue(self, submission_id: str, generation: int) -> bool:
        try:
            from .tasks import TASK_NAME

            self.app.send_task(TASK_NAME, args=(submission_id, generation), retry=True,
                               retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2,
                                             "interval_max": 0.5})
        except Exception as e:  # kombu raises many types; any failure leaves the job to the sweeper
            log.warning("submission %s: broker unavailable, left queued for the sweeper: %s", submission_id, e)
            return False
        return True

    def close(self) -> None:
        self.app.close()
