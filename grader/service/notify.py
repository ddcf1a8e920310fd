"""Finished gradings announced on the Redis broker (pub/sub), so that an API's long polls and
event streams answer as soon as a worker on any host commits a result, instead of each waiting
client polling the database. Best effort: a lost message costs one poll interval, nothing else."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("grader.service")
CHANNEL = "grader:done"
_clients: dict[str, Any] = {}
_lock = threading.Lock()


def publish_done(broker_url: str, submission_id: str) -> None:
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


class Subscriber:
    """A background thread calling ``on_done(submission_id)`` for each announcement."""

    def __init__(self, broker_url: str, on_done: Callable[[str], None]) -> None:
        self.broker_url, self.on_done = broker_url, on_done
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="done-subscriber")

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
                        self.on_done(message["data"].decode("ascii", "replace"))
                pubsub.close()
                client.close()
            except redis.RedisError as e:
                log.info("announcements unavailable, polling meanwhile: %s", e)
                self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
