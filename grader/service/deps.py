"""What every router of the service shares, reached through FastAPI dependencies and the app's
state (``request.app.state``, set once by ``app.create_app``), never through closures.

    the app's state       ``db``, ``settings``, ``dispatcher``, ``waiters``, ``waiting``: ``run`` a unit
                          of work, ``dispatch`` a committed submission, the live-status ``Waiters``
    the API's principal   ``Who`` (any bearer token), ``StaffOnly``
    the pages' principal  ``signed_in`` (the session cookie), ``check_csrf`` (every form POST)
    waiting connections   ``take_place``: the per-person and per-process caps on event streams and
                          long polls (``limits.Waiting``); uploads are rate limited by ``ops.submit``
    body caps             ``limits.BodyLimit``, a middleware: a route's cap (``limits.body_cap``, by
                          path) is enforced before the route, or a dependency, runs

The pages call ``check_csrf`` and then ``signed_in`` inside each route, not as dependencies: so a
form is validated first (400), then its CSRF token (403, before the store is asked who is
signed in), then the session (a redirect, or 401), in the order the pages always answered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Form, Path, Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy.orm import Session

from ..errors import Forbidden, SignInFirst
from ..results.database import Database
from .auth import Principal, authenticate, bearer, require_staff
from .dispatch import Dispatcher
from .limits import SIGNED_IN, Waiting
from .notify import Waiters
from .schemas import SLUG, SUBMISSION_ID
from .settings import ServiceSettings
from .sweeper import hand_over
from .web.sessions import csrf_ok, load_secret, principal_of, session_claim

T = TypeVar("T")
Slug = Annotated[str, Path(pattern=SLUG)]
SubmissionId = Annotated[str, Path(pattern=SUBMISSION_ID)]
Csrf = Annotated[str, Form(max_length=200)]


# ---- the app's state -------------------------------------------------------------------------------


def database(request: Request) -> Database:
    db: Database = request.app.state.db
    return db


def settings(request: Request) -> ServiceSettings:
    found: ServiceSettings = request.app.state.settings
    return found


def waiters(request: Request) -> Waiters:
    found: Waiters = request.app.state.waiters
    return found


def lms_panel(request: Request) -> Callable[[Session, int], dict[str, Any] | None]:
    """The LMS gradebook panel of an assignment's dashboard (``lti.ags.passback_panel``, set by
    ``create_app``: the pages do not import LTI, which builds on them); None without LMS links."""
    found: Callable[[Session, int], dict[str, Any] | None] = getattr(request.app.state, "lms_panel", _no_panel)
    return found


def _no_panel(_session: Session, _assignment_id: int) -> None:
    return None


def run(request: Request, work: Callable[[Session], T]) -> T:
    """One unit of work on the store (``Database.run``: committed, retried over a restart)."""
    return database(request).run(work)


def runner(request: Request) -> Callable[[Callable[[Session], Any]], Any]:
    """``run`` bound to this request's app (for helpers that take a runner)."""
    return database(request).run


def dispatch(request: Request, submission_id: str, generation: int) -> None:
    """Hand a committed submission to the graders; refused (broker down), it stays queued and the
    sweeper hands it over."""
    dispatcher: Dispatcher = request.app.state.dispatcher
    hand_over(database(request), dispatcher, submission_id, generation)


# ---- the API's principal (a bearer token) --------------------------------------------------------


async def current_principal(request: Request) -> Principal:
    """The bearer token's principal: the one ``limits.BodyLimit`` looked up already (no thread hop,
    no store read), else looked up now, in a thread."""
    token = bearer(request)
    found = _looked_up(request, token)
    if found is not None:
        return found
    principal: Principal = await run_in_threadpool(database(request).run, lambda s: authenticate(s, token))
    return principal


def token_principal(session: Session, request: Request, token: str) -> Principal:
    """The principal of ``token`` (``bearer_token``), looked up in ``session``: a route that reads
    the store anyway signs its request in within the same transaction."""
    return _looked_up(request, token) or authenticate(session, token)


def _looked_up(request: Request, token: str) -> Principal | None:
    """The principal of ``token`` if ``limits.BodyLimit`` looked it up already for this request."""
    found = request.scope.get(SIGNED_IN)
    if found is not None and found[0] == token:
        principal: Principal = found[1]
        return principal
    return None


async def bearer_token(request: Request) -> str:
    """The request's bearer token, not yet looked up (401 without one); async, so no thread hop."""
    return bearer(request)


async def current_staff(request: Request) -> Principal:
    """Staff only. FastAPI reads a route's body before its dependencies run: what keeps a body from
    being read before authentication is ``limits.BodyLimit`` (its size, and a known token)."""
    principal = await current_principal(request)
    require_staff(principal)
    return principal


Who = Annotated[Principal, Depends(current_principal)]
Token = Annotated[str, Depends(bearer_token)]  # for a route that signs in with ``token_principal`` in its own work
StaffOnly = Annotated[Principal, Depends(current_staff)]


# ---- the pages' principal (a session cookie) and CSRF ----------------------------------------------


def web_secret(request: Request) -> bytes:
    """The session and CSRF signing secret (``web.sessions.load_secret``), read once per app."""
    state = request.app.state
    if getattr(state, "web_secret", None) is None:
        state.web_secret = run(request, load_secret)
    secret: bytes = state.web_secret
    return secret


def browser_principal(request: Request) -> Principal | None:
    """Who this browser's session cookie signs in, if anyone (its session still open)."""
    claim = session_claim(web_secret(request), request)
    if claim is None:
        return None
    found: Principal | None = run(request, lambda s: principal_of(s, claim))
    return found


def signed_in(request: Request, *, staff: bool = False) -> Principal:
    """The signed-in browser's person (``SignInFirst`` otherwise: a redirect to the sign-in page)."""
    who = browser_principal(request)
    if who is None:
        raise SignInFirst()
    if staff and not who.staff:
        raise Forbidden("staff only: this page is for course staff")
    return who


def check_csrf(request: Request, token: str) -> None:
    if not csrf_ok(web_secret(request), request, token):
        raise Forbidden("this form has expired or came from another site; reload the page and try again")


# ---- waiting connections ---------------------------------------------------------------------------


def who_waits(principal: Principal) -> str:
    return f"{principal.kind}:{principal.student_pk if principal.student_pk is not None else principal.name}"


def take_place(request: Request, principal: Principal) -> Callable[[], None]:
    """A place for one event stream or long poll of ``principal`` (429 or 503 over the caps); call
    the result once to give it back."""
    waiting: Waiting = request.app.state.waiting
    return waiting.take(who_waits(principal))
