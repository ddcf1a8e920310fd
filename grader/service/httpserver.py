"""The HTTP server ``grader serve`` runs: uvicorn's HTTP protocol (httptools) with one more timeout.

uvicorn closes a keep-alive connection that stays idle after a response, but waits forever for the
first request of a new connection, and for a request head sent a byte at a time; a few thousand
such connections hold the API's sockets. Here a connection whose request head is not complete
within ``header_timeout_s`` (from when it opened, or when its last response ended) is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any

try:  # uvicorn's C parser (llhttp) when installed, else its pure-Python h11 one
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as Base
except ImportError:  # pragma: no cover - the service extra installs httptools
    from uvicorn.protocols.http.h11_impl import H11Protocol as Base  # type: ignore[assignment]


def protocol(header_timeout_s: float) -> type[asyncio.Protocol]:
    """uvicorn's ``http=`` protocol class with the request-head deadline."""

    class HeadDeadline(Base):
        _deadline: asyncio.TimerHandle | None = None
        _waiting_since: Any = None  # the cycle that was current when the deadline was set

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            super().connection_lost(exc)

        def _arm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
            self._waiting_since = self.cycle
            self._deadline = self.loop.call_later(header_timeout_s, self._expired)

        def _expired(self) -> None:
            self._deadline = None
            if self.cycle is self._waiting_since and not self.transport.is_closing():  # no new request head
                self.transport.close()

    return HeadDeadline
