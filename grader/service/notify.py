"""Status changes told to the API's waiting connections (long polls, event streams), so that they
answer as soon as a grading starts or its result is committed, instead of each re-reading the store.

The embedded pool calls ``Waiters.notify`` itself; a ``grader worker`` on any host announces the
change on the Redis broker (``announce``, pub/sub), and each API's ``Subscriber`` hands it to its
``Waiters``. An announcement is only a submission id: whoever waits reads the status again. Best
effort: a lost message costs one poll interval (``poll_interval_s``), nothing else."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("grader.service")
CHANNEL = "grader:done"  # its name from when only finished gradings were announced (older APIs listen on it)
_clients: dict[str, Any] = {}
_lock = threading.Lock()


def announce(broker_url: str, submission_id: str) -> None:
    """Tell every API that ``submission_id``'s status changed (its grading started or finished)."""
    import redis

    try:
        with _lock:
            client = _clients.get(broker_url)
            if client is None:
                client = _clients[broker_url] = redis.Redis.from_url(broker_url, socket_timeout=2,
                                                                      socket_connect_timeout=2)
        client.publish(CHANNEL, submission_id)
    except redis.RedisError as e:
        log.info("could not announce %s (the API will poll instead): %s", submission_id, e)


class Waiters:
    """The API process's waiting connections, by submission: ``notify`` (from any thread) wakes
    those of one submission."""

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


class Subscriber:
    """A background thread calling ``on_change(submission_id)`` for each announcement."""

    def __init__(self, broker_url: str, on_change: Callable[[str], None]) -> None:
        self.broker_url, self.on_change = broker_url, on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="status-subscriber")

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        import redis

        while not self._stop.is_set():
            try:
                client = redis.Redis.from_url(self.broker_url, socket_connect_timeout=2, socket_timeout=5)
                pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
                pubsub.subscribe(CHANNEL)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message and isinstance(message.get("data"), bytes):
                        self.on_change(message["data"].decode("ascii", "replace"))
                pubsub.close()
                client.close()
            except redis.RedisError as e:
                log.info("announcements unavailable, polling meanwhile: %s", e)
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
