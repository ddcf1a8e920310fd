"""Handing a committed submission to the graders: the embedded in-process pool, or Celery.

A submission is always committed before it is handed over, so a hand-over that fails (broker
down) loses nothing: the submission stays ``queued`` and the sweeper hands it over again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from ..results.database import Database
from .jobs import Heartbeat, run_job
from .notify import ENDED, STARTED, Change
from .settings import ServiceSettings

log = logging.getLogger("grader.service")


class Dispatcher(Protocol):
    def enqueue(self, submission_id: str, generation: int) -> bool:
        """Hand the job over; False if it could not be (it stays queued for the sweeper)."""

    def close(self) -> None: ...


ABANDON_WAIT_S = 2.0


class LocalPool:
    """The embedded mode's graders: ``settings.workers`` threads in the API process, each with its
    own warm sandbox. ``on_change(submission_id, change, view)`` is called once a job's grading has
    started (``STARTED``) and again after it ended (``ENDED``, with the status view its committed
    result gave, if it stored one; ``notify.Waiters.notify``: the live statuses answer at once)."""

    def __init__(self, db: Database, settings: ServiceSettings,
                 on_change: Callable[[str, Change, dict[str, Any] | None], None] | None = None) -> None:
        self.db, self.settings, self.on_change = db, settings, on_change
        self._pool = ThreadPoolExecutor(max_workers=max(1, settings.workers), thread_name_prefix="grade")
        self._closed, self._abandoned = threading.Event(), threading.Event()
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, int], int] = {}  # handed over, not finished: job -> copies
        self._running = 0
        self.abandoned_threads = 0
        self._heartbeat = Heartbeat(db, settings.hostname, settings.backend, settings.heartbeat_s).start()

    def enqueue(self, submission_id: str, generation: int) -> bool:
        with self._lock:
            if self._closed.is_set():
                return False
            key = (submission_id, generation)
            self._pending[key] = self._pending.get(key, 0) + 1
        self._pool.submit(self._run, submission_id, generation)
        return True

    def depth(self) -> int:
        with self._lock:
            return sum(self._pending.values())

    def held(self) -> set[tuple[str, int]]:
        with self._lock:
            return set(self._pending)

    def _run(self, submission_id: str, generation: int) -> None:
        s = self.settings
        with self._lock:
            self._running += 1
        stored: list[dict[str, Any]] = []  # the final status view, for the waiters
        try:
            run_job(self.db, submission_id, generation, worker=s.hostname, backend=s.backend, official=s.official,
                    abandoned=self._abandoned, on_started=self._started, on_stored=stored.append)
        except Exception:  # the store is down past its retries: the next start hands the job over again
            if not self._abandoned.is_set():
                log.exception("submission %s: grading could not be recorded", submission_id)
        finally:
            with self._lock:
                self._running -= 1
                key = (submission_id, generation)
                self._pending[key] -= 1
                if not self._pending[key]:
                    del self._pending[key]
            if self.on_change is not None:
                self.on_change(submission_id, ENDED, stored[0] if stored else None)

    def _started(self, submission_id: str) -> None:
        if self.on_change is not None:
            self.on_change(submission_id, STARTED, None)

    def close(self) -> None:
        """Stop taking work; give the gradings in progress ``shutdown_grace_s`` to finish and be
        stored; leave the rest in the store, ``queued`` (or ``grading``, abandoned past the grace),
        for the next start, which hands it all over again."""
        with self._lock:
            self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)  # what no thread has started stays queued
        with self._lock:
            running = self._running
        deadline = time.monotonic() + self.settings.shutdown_grace_s
        while self._busy() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._busy():
            log.warning("shutdown: %d grading(s) still running after %.0f s, left for the next start",
                        self._busy(), self.settings.shutdown_grace_s)
            self._abandoned.set()  # their results are not stored: the next start grades them again
        elif running:
            log.info("shutdown: the %d grading(s) in progress finished", running)
        self._heartbeat.stop()
        from .grading import close_graders

        close_graders()  # ends the sandboxes; a grading abandoned above is not waited for
        deadline = time.monotonic() + (ABANDON_WAIT_S if self._abandoned.is_set() else float("inf"))
        while self._busy() and time.monotonic() < deadline:
            time.sleep(0.05)
        self.abandoned_threads = self._busy()  # ``grader serve`` exits without joining them

    def _busy(self) -> int:
        with self._lock:
            return self._running


class _Sent:
    """What ``send_task`` returns here in place of a result (Celery sets ``ignored`` on it)."""

    def __init__(self, task_id: str) -> None:
        self.id, self.ignored = task_id, True


class CeleryDispatcher:
    """The scaled-out mode: a Celery task on the Redis broker, picked up by ``grader worker``s."""

    def __init__(self, settings: ServiceSettings) -> None:
        from .tasks import make_celery

        self.app: Any = make_celery(settings)
        self.broker = settings.broker
        self._client: Any = None

    def enqueue(self, submission_id: str, generation: int) -> bool:
        try:
            from .tasks import TASK_NAME

            # No result is kept: without ignore_result and result_cls, Celery builds a result
            # backend in each new thread of the API's pool (a scan of installed packages each time).
            self.app.send_task(TASK_NAME, args=(submission_id, generation), retry=True, ignore_result=True,
                               result_cls=_Sent, task_id=f"{submission_id}.{generation}.{uuid.uuid4().hex[:12]}",
                               retry_policy={"max_retries": 2, "interval_start": 0.1, "interval_step": 0.2,
                                             "interval_max": 0.5})
        except Exception as e:  # kombu raises many types; any failure leaves the job to the sweeper
            log.warning("submission %s: broker unavailable, left queued for the sweeper: %s", submission_id, e)
            return False
        return True

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.broker, socket_timeout=3, socket_connect_timeout=3)
        return self._client

    def depth(self) -> int | None:
        """How many jobs the broker holds: queued, or taken by a worker and not acknowledged."""
        from .tasks import QUEUE

        try:
            pipe = self._redis().pipeline()
            pipe.llen(QUEUE)
            pipe.hlen(UNACKED)
            queued, taken = pipe.execute()
        except Exception as e:  # the broker is down: nothing can be said
            log.debug("broker depth unknown: %s", e)
            return None
        return int(queued) + int(taken)

    def held(self) -> set[tuple[str, int]] | None:
        """The (submission, generation) of every job the broker holds; None if it does not answer."""
        from .tasks import QUEUE

        try:
            pipe = self._redis().pipeline()
            pipe.lrange(QUEUE, 0, -1)
            pipe.hvals(UNACKED)
            queued, taken = pipe.execute()
        except Exception as e:
            log.debug("broker contents unknown: %s", e)
            return None
        return set(_jobs(queued, taken))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self.app.close()


UNACKED = "unacked"  # kombu's Redis transport keeps the jobs taken and not acknowledged in this hash


def _jobs(queued: Iterable[bytes], taken: Iterable[bytes]) -> Iterable[tuple[str, int]]:
    """The jobs in kombu's Redis messages (a queue's entries; the unacked hash's ``[message,
    exchange, routing key]``), from the task id the API gave them (``<submission>.<generation>.<n>``)."""
    for raw, wrapped in [(m, False) for m in queued] + [(m, True) for m in taken]:
        try:
            message = json.loads(raw)
            if wrapped:
                message = message[0]
            submission_id, generation, _ = str(message["headers"]["id"]).split(".")
            yield submission_id, int(generation)
        except (ValueError, KeyError, TypeError, IndexError):
            continue  # not a job of this API's (another version's id): not counted as held
