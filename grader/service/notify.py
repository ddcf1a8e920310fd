"""Status changes told to the API's waiting connections (long polls, event streams), so that they
answer as soon as a grading starts or its result is committed, instead of each re-reading the store.

The embedded pool calls ``Waiters.notify`` itself; a ``grader worker`` on any host announces the
change on the Redis broker (``announce``, pub/sub), and each API's ``Subscriber`` hands it to its
``Waiters``. An announcement is a submission id and what changed (``STARTED`` or ``ENDED``, the
latter with the final status view the worker's commit gave): whoever waits for that change reads
the status again, unless the announcement told it, and a long poll, which wants only the final
status, sleeps through ``STARTED``. Best effort: a lost message costs one poll interval
(``poll_interval_s``), nothing else: every interval, ``Waiters.watch`` reads the status of all
waited-for submissions at once, not once per waiter."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import Callable
from typing import Any, Final, Literal

from .ops import WAITING

log = logging.getLogger("grader.service")
CHANNEL = "grader:done"  # its name from when only finished gradings were announced (older APIs listen on it)
Change = Literal["started", "ended"]  # a grading's status changes, as announced
STARTED: Final = "started"
ENDED: Final = "ended"
_clients: dict[str, Any] = {}
_lock = threading.Lock()


def announce(broker_url: str, submission_id: str, change: Change, view: dict[str, Any] | None = None) -> None:
    """Tell every API that ``submission_id``'s grading started or ended (``change``), and, once it
    ended, the final status ``view`` its commit gave (so that its waiters need not read it)."""
    import redis

    try:
        with _lock:
            client = _clients.get(broker_url)
            if client is None:
                client = _clients[broker_url] = redis.Redis.from_url(broker_url, socket_timeout=2,
                                                                      socket_connect_timeout=2)
        told = f" {json.dumps(view, separators=(',', ':'))}" if view is not None and change == ENDED else ""
        client.publish(CHANNEL, f"{submission_id} {change}{told}")
    except redis.RedisError as e:
        log.info("could not announce %s (the API will poll instead): %s", submission_id, e)


class Waiters:
    """The API process's waiting connections, by submission: ``notify`` (from any thread) wakes
    those of one submission, and, when it is a grading that started (``started_in`` says so: one
    store read, only while someone follows a queue), the event streams of the same assignment's
    queued uploads, whose place in the queue moved. ``watch`` is the slow fallback for what no
    announcement told: one store read for all the waiting connections every interval."""

    def __init__(self, started_in: Callable[[str], int | None] | None = None) -> None:
        self._events: dict[str, dict[asyncio.Event, object]] = {}  # each waiter's last seen status
        self._final_only: set[asyncio.Event] = set()  # waiters not woken by a grading that starts
        self._ended: dict[str, dict[str, Any]] = {}  # the final status views announced, while waited for
        self._followers: dict[int, set[asyncio.Event]] = {}  # by assignment: streams of queued uploads
        self.started_in = started_in  # the assignment of a submission now grading, else None
        self.loop: asyncio.AbstractEventLoop | None = None

    def notify(self, submission_id: str, change: Change | None = None,
               view: dict[str, Any] | None = None) -> None:  # any thread
        """``change``: None when the announcer did not say (an older worker): every waiter wakes.
        ``view``: the final status a grading that ended stored, if told (``ended_view``)."""
        if self.loop is not None and not self.loop.is_closed():
            self.loop.call_soon_threadsafe(self._set, submission_id, change, view)

    def _set(self, submission_id: str, change: Change | None, view: dict[str, Any] | None = None) -> None:
        if change == ENDED and view is not None and submission_id in self._events:
            self._ended[submission_id] = view
        for event in self._events.get(submission_id, ()):
            if not (change == STARTED and event in self._final_only):
                event.set()
        if change != ENDED and self._followers and self.started_in is not None and self.loop is not None:
            self.loop.create_task(self._wake_followers(submission_id))

    async def _wake_followers(self, submission_id: str) -> None:
        assert self.loop is not None and self.started_in is not None
        try:
            assignment = await self.loop.run_in_executor(None, self.started_in, submission_id)
        except Exception:  # the store is unreachable: the streams re-read it at their next interval
            log.info("could not tell the queue of %s's assignment that it moved", submission_id, exc_info=True)
            return
        for event in self._followers.get(assignment, ()) if assignment is not None else ():
            event.set()

    def register(self, submission_id: str, *, follows: int | None = None, final_only: bool = False) -> asyncio.Event:
        """An event set when ``submission_id``'s status changes (``final_only``: when its grading
        ends, not when it starts), and (``follows``: an assignment) when a grading of that
        assignment starts."""
        event = asyncio.Event()
        self._events.setdefault(submission_id, {})[event] = None
        if final_only:
            self._final_only.add(event)
        if follows is not None:
            self._followers.setdefault(follows, set()).add(event)
        return event

    def seen(self, submission_id: str, event: asyncio.Event, status: object) -> None:
        """What this waiter read last (``watch`` wakes it when the store says otherwise)."""
        waiting = self._events.get(submission_id)
        if waiting is not None and event in waiting:
            waiting[event] = status

    def ended_view(self, submission_id: str, generation: int) -> dict[str, Any] | None:
        """The final status announced for ``generation`` of ``submission_id`` while it was waited
        for, if one was: what a read of the store would give (or a later regrade's)."""
        view = self._ended.get(submission_id)
        return view if view is not None and view["generation"] == generation else None

    def unregister(self, submission_id: str, event: asyncio.Event) -> None:
        waiting = self._events.get(submission_id, {})
        waiting.pop(event, None)
        self._final_only.discard(event)
        if not waiting:
            self._events.pop(submission_id, None)
            self._ended.pop(submission_id, None)
        for assignment, followers in list(self._followers.items()):
            if event in followers:
                followers.discard(event)
                if not followers:
                    del self._followers[assignment]

    async def watch(self, read: Callable[[list[str]], dict[str, object]], interval_s: float) -> None:
        """Until cancelled: every ``interval_s``, the status of every waited-for submission in one
        store read (``read(ids)``: id -> status), waking each waiter whose last seen status differs."""
        assert self.loop is not None
        while True:
            await asyncio.sleep(interval_s)
            waiting = {sid: [(e, s) for e, s in events.items() if s is not None] for sid, events in self._events.items()}
            ids = sorted(sid for sid, events in waiting.items() if events)
            if not ids:
                continue
            try:
                now: dict[str, object] = {}
                for first in range(0, len(ids), WATCH_CHUNK):
                    now |= await self.loop.run_in_executor(None, read, ids[first:first + WATCH_CHUNK])
            except Exception:  # the store is down: the waits end at their deadlines, or the next read tells
                log.info("could not re-read the waited-for statuses", exc_info=True)
                continue
            for sid in ids:
                for event, status in waiting[sid]:
                    if now.get(sid) != status and not (event in self._final_only and _still_waiting(status, now.get(sid))):
                        event.set()


WATCH_CHUNK = 500  # submission ids in one re-read


def _still_waiting(seen: object, now: object) -> bool:
    """Whether a (status, generation) read ``now`` is, for a waiter of the final status that saw
    ``seen``, no news: the same generation, still queued or grading."""
    return (isinstance(seen, tuple) and isinstance(now, tuple) and seen[1:] == now[1:]
            and seen[0] in WAITING and now[0] in WAITING)


def parse(data: bytes) -> tuple[str, Change | None, dict[str, Any] | None]:
    """An announcement's submission id, change (None from a worker that announced only the id) and
    final status view (None if it told none, or none that is a final status of that submission)."""
    submission_id, _, rest = data.decode("utf-8", "replace").partition(" ")
    word, _, told = rest.partition(" ")
    change: Change | None = STARTED if word == STARTED else ENDED if word == ENDED else None
    return submission_id, change, _final_view(submission_id, told) if change == ENDED else None


VIEW_MAX = 4096  # characters of a told status view at most (a view is about 500)


def _final_view(submission_id: str, told: str) -> dict[str, Any] | None:
    if not told or len(told) > VIEW_MAX:
        return None
    try:
        view = json.loads(told)
    except ValueError:
        return None
    ok = (isinstance(view, dict) and view.get("id") == submission_id and view.get("final") is True
          and type(view.get("generation")) is int and isinstance(view.get("status"), str))
    return view if ok else None


class Subscriber:
    """A background thread calling ``on_change(submission_id, change, view)`` for each announcement."""

    def __init__(self, broker_url: str, on_change: Callable[[str, Change | None, dict[str, Any] | None], None]) -> None:
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
                pubsub = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call, unused-ignore]  # typed from redis 8.2
                pubsub.subscribe(CHANNEL)
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message and isinstance(message.get("data"), bytes):
                        self.on_change(*parse(message["data"]))
                pubsub.close()
                client.close()
            except redis.RedisError as e:
                log.info("announcements unavailable, polling meanwhile: %s", e)
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
