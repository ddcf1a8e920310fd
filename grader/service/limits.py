"""The service's edge limits: request bodies refused by size before they are read, and caps on
the connections that wait (event streams and long polls), per person and per process.

``BodyLimit`` is a pure ASGI middleware: it knows each route's body cap, answers 413 at once when
``Content-Length`` says more, and counts the bytes of a body as they arrive (chunked bodies too),
cutting it off with 413 at the cap, so no route, form parser or temporary file ever holds more.
A write to ``/api/`` without a known bearer token is answered 401 before its body is read.
"""

from __future__ import annotations

import json
import re
import resource
import threading
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import Any

from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from ..errors import Busy, RateLimited, StoreUnavailable
from ..results.roster import MAX_BYTES as ROSTER_BYTES
from .settings import ServiceSettings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MULTIPART_ROOM = 64 * 1024  # a multipart body's boundaries, headers and small fields beside the file
DEFAULT_BYTES = 1024 * 1024  # JSON bodies and forms: sign-in, LTI launches, staff actions
RUBRIC_BYTES = 8 * 1024 * 1024  # an assignment's JSON with its rubric (rubric_toml: up to 1,000,000 characters)

_UPLOADS = re.compile(r"^/(api/courses/[^/]+/assignments/[^/]+/submissions|c/[^/]+/[^/]+/upload)/?$")
_ROSTERS = re.compile(r"^/(api/courses/[^/]+/roster|staff/courses/[^/]+/roster)/?$")
_ASSIGNMENTS = re.compile(r"^/api/courses/[^/]+/assignments(/[^/]+)?/?$")
_SESSION_PAGES = ("/staff/", "/c/")  # web forms that only a signed-in browser may send
_SESSION_COOKIES = (b"grader_session=", b"__Host-grader_session=")  # web.sessions' cookie, plain and over TLS


def body_cap(settings: ServiceSettings, path: str) -> tuple[int, str]:
    """The most a request body to ``path`` may hold, and what to say when one holds more."""
    if _UPLOADS.match(path):
        kib = settings.max_upload_bytes // 1024
        return settings.max_upload_bytes + MULTIPART_ROOM, (
            f"the upload is larger than the {kib} KiB limit; clear the notebook's outputs "
            "(Kernel > Restart & Clear Output), save, and upload it again")
    if _ROSTERS.match(path):
        return ROSTER_BYTES + MULTIPART_ROOM, f"the roster is larger than the {ROSTER_BYTES // 2**20} MiB limit"
    if _ASSIGNMENTS.match(path):
        return RUBRIC_BYTES, f"the request body is larger than the {RUBRIC_BYTES // 2**20} MiB limit of this route"
    return DEFAULT_BYTES, f"the request body is larger than the {DEFAULT_BYTES // 2**20} MiB limit of this route"


class _Cut(Exception):
    """The body went over its cap while it was read."""


class BodyLimit:
    """Refuses request bodies over their route's cap (413) before they are read, API writes
    without a known token (401) before their body is read, and signed-in pages' forms sent with
    no session cookie at all (401, as the page would answer) likewise."""

    def __init__(self, app: ASGIApp, settings: ServiceSettings,
                 signed_in: Callable[[Scope, str], Awaitable[bool]] | None = None) -> None:
        self.app, self.settings, self.signed_in = app, settings, signed_in

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap, too_large = body_cap(self.settings, scope["path"])
        headers = {k.lower(): v for k, v in scope.get("headers", ())}
        declared = headers.get(b"content-length", b"").strip()
        if declared and (not declared.isdigit() or int(declared) > cap):
            await answer(send, 413, too_large)
            return
        has_body = (declared not in (b"", b"0")) or b"chunked" in headers.get(b"transfer-encoding", b"").lower()
        if has_body and scope["path"].startswith("/api/") and self.signed_in is not None:
            token = _bearer(headers.get(b"authorization", b""))
            if token is None:
                await answer(send, 401, "sign in: send 'Authorization: Bearer <token>' (staff token, or your "
                                        "student token)", {"WWW-Authenticate": "Bearer"})
                return
            try:
                known = await self.signed_in(scope, token)
            except StoreUnavailable as e:
                await answer(send, 503, f"the database is unavailable; try again shortly ({e})", {"Retry-After": "5"})
                return
            if not known:
                await answer(send, 401, "unknown or revoked token", {"WWW-Authenticate": "Bearer"})
                return
        if has_body and scope["path"].startswith(_SESSION_PAGES) and \
                not any(name in headers.get(b"cookie", b"") for name in _SESSION_COOKIES):
            await answer(send, 401, "sign in first")
            return
        seen, cut, started = 0, False, False

        async def counted() -> Message:
            nonlocal seen, cut
            if cut:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    cut = True
                    raise _Cut
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if cut:  # the app's answer to a body cut short (400, say) gives way to the 413
                return
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not cut:
                raise
        if cut and not started:
            await answer(send, 413, too_large)


def _bearer(header: bytes) -> str | None:
    scheme, _, token = header.decode("latin-1").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token and len(token) <= 200 else None


SIGNED_IN = "grader.signed_in"  # the ASGI scope key of the (token, principal) that ``token_checker`` found


def token_checker(db: Any) -> Callable[[Scope, str], Awaitable[bool]]:
    """Whether a bearer token is a known credential of ``db`` (the store read in a thread); its
    principal is kept in the request's scope, so that the route does not look the token up again."""
    from fastapi import HTTPException

    from .auth import authenticate

    async def known(scope: Scope, token: str) -> bool:
        def check() -> bool:
            try:
                principal = db.run(lambda s: authenticate(s, token))
            except HTTPException:
                return False
            scope[SIGNED_IN] = (token, principal)  # for deps.current_principal: one look-up a request
            return True

        return await run_in_threadpool(check)

    return known


async def answer(send: Send, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
    """A JSON error answered without reading the request's body (so the connection closes after it)."""
    body = json.dumps({"detail": detail}).encode()
    extra = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *extra]})
    await send({"type": "http.response.body", "body": body})


# ---- event streams and long polls -------------------------------------------------------------


class Waiting:
    """Counts the connections that wait for a status (event streams, long polls) per person and in
    this process; over a cap, the next one is refused before it starts waiting."""

    def __init__(self, per_person: int, total: int) -> None:
        self.per_person, self.total = per_person, total
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def count(self, who: str | None = None) -> int:
        with self._lock:
            return sum(self._open.values()) if who is None else self._open.get(who, 0)

    def take(self, who: str) -> Callable[[], None]:
        """A place for one waiting connection of ``who``; call the result (once) to give it back."""
        with self._lock:
            if self._open.get(who, 0) >= self.per_person:
                raise RateLimited(f"you have {self.per_person} live status connections open already (event streams "
                                  "or long polls, in other tabs or scripts); close one, or ask for the status "
                                  "without waiting", retry_after=15)
            if sum(self._open.values()) >= self.total:
                raise Busy("the service is following as many live statuses as it can; reload the page in a "
                           "little while (grading goes on meanwhile)", retry_after=15)
            self._open[who] = self._open.get(who, 0) + 1
        given = False

        def give_back() -> None:
            nonlocal given
            with self._lock:
                if given:
                    return
                given = True
                left = self._open.get(who, 0) - 1
                if left > 0:
                    self._open[who] = left
                else:
                    self._open.pop(who, None)

        return give_back

    @contextmanager
    def held(self, who: str) -> Iterator[None]:
        give_back = self.take(who)
        try:
            yield
        finally:
            give_back()


def raise_open_files() -> None:
    """Raise this process's soft limit on open files to its hard one (a server's sockets, files
    and database connections all count against it; the common soft default is 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):  # a container that forbids it: the soft limit stands
            pass


def streams_cap(wanted: int) -> int:
    """The process's cap on waiting connections: ``wanted``, but at most half the open files this
    process may hold, so that the database, the uploads and ``/healthz`` always find one."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return wanted if soft == resource.RLIM_INFINITY else max(1, min(wanted, soft // 2))


class HeldStream(StreamingResponse):
    """An event stream that gives its place back when it ends, however it ends (a client that
    goes away included)."""

    def __init__(self, content: Any, give_back: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.give_back = give_back

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.give_back()
