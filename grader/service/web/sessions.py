"""Browser sign-in: a signed session cookie, and CSRF tokens bound to a per-browser cookie.

The session cookie holds no credential: ``kind.pk.expiry.fingerprint`` signed with HMAC-SHA256,
where the fingerprint is a prefix of the stored token hash, so issuing a person a new token (a
roster ``rotate``) signs every browser of theirs out. Cookies are HttpOnly, SameSite=Lax, and
Secure when the request came over TLS (directly, or from a local reverse proxy's
``X-Forwarded-Proto``, which uvicorn honours for 127.0.0.1).

CSRF: every browser gets a random ``grader_csrf`` cookie; each form carries
HMAC(secret, that cookie). A POST whose field does not match, or whose ``Origin`` is another
site's, is refused before anything else is read from the store.

The signing secret is ``GRADER_SESSION_SECRET`` when set (give every API replica the same one),
else a random one kept in the store's ``meta`` table, made on first use.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import time
from dataclasses import dataclass
from typing import Literal

from fastapi import Request, Response
from sqlalchemy.orm import Session

from ..auth import Principal
from ..ops import stored_secret
from ..tables import Staff, Student

SESSION_COOKIE, CSRF_COOKIE = "grader_session", "grader_csrf"
SESSION_MAX_AGE_S = 12 * 3600
SECRET_KEY = "service.session_secret"
FINGERPRINT = 16


def load_secret(session: Session) -> bytes:
    """The signing secret: from the environment, else the store's (made once, race-free)."""
    given = os.environ.get("GRADER_SESSION_SECRET", "")
    if given:
        return given.encode()
    return stored_secret(session, SECRET_KEY)


def _sign(secret: bytes, payload: str) -> str:
    return hmac.new(secret, payload.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class SessionClaim:
    kind: Literal["staff", "student"]
    pk: int
    fingerprint: str


def session_value(secret: bytes, kind: str, pk: int, token_hash: str, now: float | None = None) -> str:
    expiry = int((now or time.time()) + SESSION_MAX_AGE_S)
    payload = f"{kind}.{pk}.{expiry}.{token_hash[:FINGERPRINT]}"
    return f"{payload}.{_sign(secret, payload)}"


def read_session(secret: bytes, value: str, now: float | None = None) -> SessionClaim | None:
    """The claim of a session cookie, or None if it is forged, malformed or expired."""
    payload, _, signature = value.rpartition(".")
    if not payload or not hmac.compare_digest(signature, _sign(secret, payload)):
        return None
    kind, pk, expiry, fingerprint = [*payload.split("."), "", "", "", ""][:4]
    if kind not in ("staff", "student") or not pk.isdigit() or not expiry.isdigit():
        return None
    if int(expiry) < (now or time.time()):
        return None
    return SessionClaim(kind, int(pk), fingerprint)  # type: ignore[arg-type]


def principal_of(session: Session, claim: SessionClaim) -> Principal | None:
    """The person a valid claim names, if their credential is still the one they signed in with."""
    if claim.kind == "staff":
        staff = session.get(Staff, claim.pk)
        if staff is not None and hmac.compare_digest(staff.token_hash[:FINGERPRINT], claim.fingerprint):
            return Principal("staff", staff.name)
        return None
    student = session.get(Student, claim.pk)
    if student is not None and hmac.compare_digest(student.token_hash[:FINGERPRINT], claim.fingerprint):
        return Principal("student", student.student_id, student.id, student.course_id)
    return None


def local_path(url: str) -> str:
    """A redirect target on this site only (a path, never another host), else ""."""
    return url if url.startswith("/") and not url.startswith(("//", "/\\")) and len(url) < 300 else ""


def secure(request: Request) -> bool:
    return request.url.scheme == "https"


def set_session(response: Response, request: Request, value: str) -> None:
    response.set_cookie(SESSION_COOKIE, value, max_age=SESSION_MAX_AGE_S, path="/", httponly=True, samesite="lax",
                        secure=secure(request))


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(SESSION_COOKIE, path="/", httponly=True, samesite="lax", secure=secure(request))


def browser_id(request: Request) -> tuple[str, bool]:
    """This browser's CSRF cookie value, and whether it is new (then it must be set)."""
    value = request.cookies.get(CSRF_COOKIE, "")
    if len(value) == 43 and value.replace("-", "").replace("_", "").isalnum():
        return value, False
    return secrets.token_urlsafe(32), True


def set_browser_id(response: Response, request: Request, value: str) -> None:
    response.set_cookie(CSRF_COOKIE, value, path="/", httponly=True, samesite="lax", secure=secure(request))


def csrf_token(secret: bytes, browser: str) -> str:
    return _sign(secret, f"csrf.{browser}")


def csrf_ok(secret: bytes, request: Request, given: str) -> bool:
    """The form's token matches this browser's cookie, and the request does not come from
    another origin."""
    origin = request.headers.get("origin")
    if origin is not None and origin.rstrip("/") != _own_origin(request):
        return False
    browser = request.cookies.get(CSRF_COOKIE, "")
    return bool(browser) and bool(given) and hmac.compare_digest(given, csrf_token(secret, browser))


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
