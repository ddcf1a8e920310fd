"""The HTTP server ``grader serve`` runs: uvicorn's HTTP protocol (httptools) with three more bounds.

uvicorn closes a keep-alive connection that stays idle after a response, but bounds nothing else a
client controls before the application sees its request:

- time to send a request head: it waits forever for the first request of a new connection, and for
  a head sent a byte at a time. A connection whose head is not complete within ``header_timeout_s``
  (from when it opened, or when its last response ended) is closed;
- size of a request head: llhttp has no limit (h11 had 16 KiB), so one header line of 60 MiB was
  buffered whole. A head over ``MAX_HEAD_BYTES`` is answered 431 and the connection closed;
- pace of a request body: a body trickled a byte at a time held its connection (and a file
  descriptor) for ever. As Apache's mod_reqtimeout does, a body must keep arriving at
  ``MIN_BODY_RATE`` bytes/s, measured over each ``header_timeout_s`` window, or it is answered 408
  and the connection closed. A window in which the server itself stopped reading (the application
  has not taken the body yet) does not count against the client.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:  # uvicorn's C parser (llhttp) when installed, else its pure-Python h11 one
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base

    COUNTS_HEAD = True  # h11 refuses heads over 16 KiB itself, and has no on_headers_complete
except ImportError:  # pragma: no cover - the service extra installs httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]

    COUNTS_HEAD = False

MAX_HEAD_BYTES = 64 * 1024  # nginx's default buffers hold 4 x 8 KiB; a browser's cookies stay far below
MIN_BODY_RATE = 1024  # bytes per second; a class's notebooks on the slowest link still go through


def _refusal(status: bytes) -> bytes:
    return b"HTTP/1.1 " + status + b"\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"


def protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's ``http=`` protocol class with the request-head deadline and size cap and the body pace."""

    class Bounded(Base):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_since: Any = None  # the cycle that was current when the deadline was set
        _head_pending = False  # between the end of a response (or the connection's start) and a whole head
        _head_bytes = 0
        _body_timer: asyncio.TimerHandle | None = None
        _body_bytes = 0  # received in the current window

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._head_pending and self._head_bytes > MAX_HEAD_BYTES:
                self._refuse(b"431 Request Header Fields Too Large")
                return
            super().data_received(data)
            if self._head_pending:  # the head did not end in this chunk: all of it was head
                self._head_bytes += len(data)

        def on_headers_complete(self) -> None:
            self._head_pending = False
            super().on_headers_complete()
            self._body_bytes = 0
            self._watch_body()

        def on_body(self, body: bytes) -> None:
            self._body_bytes += len(body)
            super().on_body(body)

        def on_message_complete(self) -> None:
            self._stop_body_watch()
            super().on_message_complete()

        def on_response_complete(self) -> None:
            pipelined = bool(self.pipeline)  # a next request whose head was read already starts now
            super().on_response_complete()
            if not pipelined:
                self._stop_body_watch()
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._stop_body_watch()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._waiting_since = self.cycle
            self._head_pending, self._head_bytes = COUNTS_HEAD, 0
            self._deadline = self.loop.call_later(header_timeout_s, self._expired)

        def _expired(self) -> None:
            self._deadline = None
            if self.cycle is self._waiting_since and not self.transport.is_closing():  # no new request head
                self.transport.close()

        def _watch_body(self) -> None:
            self._stop_body_watch()
            self._body_timer = self.loop.call_later(header_timeout_s, self._body_window_ended)

        def _stop_body_watch(self) -> None:
            if self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def _body_window_ended(self) -> None:
            self._body_timer = None
            if self.transport.is_closing():
                return
            if self._body_bytes < MIN_BODY_RATE * header_timeout_s and not self.flow.read_paused:
                self._refuse(b"408 Request Timeout")
                return
            self._body_bytes = 0
            self._watch_body()

        def _refuse(self, status: bytes) -> None:
            cycle = self.cycle
            if cycle is None or not cycle.response_started:
                self.transport.write(_refusal(status))
            self.transport.close()

    return Bounded
