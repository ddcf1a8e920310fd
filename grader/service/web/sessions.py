"""Browser sign-in: a signed session cookie naming a session kept in the store, and CSRF tokens
bound to that session.

The session cookie holds no credential: ``kind.pk.expiry.fingerprint.sid`` signed with
HMAC-SHA256, where the fingerprint is a prefix of the stored token hash (issuing a person a new
token signs every browser of theirs out) and ``sid`` names a ``web_sessions`` row (kept as its
hash). Signing out deletes the row, so the cookie is dead at once even if a copy of it is kept;
"sign out everywhere" (staff, for themselves or for a student) deletes every row of a person.
Cookies are HttpOnly, SameSite=Lax, and, when the request came over TLS (directly, or from a local
reverse proxy's ``X-Forwarded-Proto``, which uvicorn honours for 127.0.0.1), Secure and named
with the ``__Host-`` prefix: no other site, not even a sibling subdomain, can set them.

CSRF: each form carries HMAC(secret, the session id), or, before signing in, HMAC(secret, a random
per-browser ``grader_csrf`` cookie). A POST whose field does not match, whose ``Origin`` (or,
without one, ``Referer``) is another site's, or that carries neither, is refused before anything
else is read from the store (every browser sends an ``Origin`` with a form POST).

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
from datetime import timedelta
from typing import Literal
from urllib.parse import urlparse

from fastapi import Request, Response
from sqlalchemy import delete
from sqlalchemy.orm import Session

from ...results.tables import Staff, Student, WebSession, utcnow
from ..auth import Principal
from ..ops import stored_secret

SESSION_COOKIE, CSRF_COOKIE = "grader_session", "grader_csrf"
HOST_PREFIX = "__Host-"  # over TLS: Secure, Path=/, no Domain (browsers enforce it)
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


def _sid_hash(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


@dataclass(frozen=True)
class SessionClaim:
    kind: Literal["staff", "student"]
    pk: int
    fingerprint: str
    sid: str = ""


def session_value(secret: bytes, kind: str, pk: int, token_hash: str, now: float | None = None, sid: str = "") -> str:
    expiry = int((now or time.time()) + SESSION_MAX_AGE_S)
    payload = f"{kind}.{pk}.{expiry}.{token_hash[:FINGERPRINT]}.{sid}"
    return f"{payload}.{_sign(secret, payload)}"


def start_session(session: Session, secret: bytes, kind: str, pk: int, token_hash: str) -> str:
    """A new session in the store, and the cookie value that names it (expired sessions go)."""
    now = utcnow()
    session.execute(delete(WebSession).where(WebSession.expires_at < now))
    sid = secrets.token_urlsafe(24)
    session.add(WebSession(id=_sid_hash(sid), kind=kind, principal_pk=pk,
                           expires_at=now + timedelta(seconds=SESSION_MAX_AGE_S)))
    return session_value(secret, kind, pk, token_hash, sid=sid)


def end_session(session: Session, claim: SessionClaim) -> None:
    """Sign this session out: its cookie, and every copy of it, stops working."""
    if claim.sid:
        session.execute(delete(WebSession).where(WebSession.id == _sid_hash(claim.sid)))


def read_session(secret: bytes, value: str, now: float | None = None) -> SessionClaim | None:
    """The claim of a session cookie, or None if it is forged, malformed or expired."""
    payload, _, signature = value.rpartition(".")
    if not payload or not hmac.compare_digest(signature, _sign(secret, payload)):
        return None
    kind, pk, expiry, fingerprint, sid = [*payload.split("."), "", "", "", "", ""][:5]
    if kind not in ("staff", "student") or not pk.isdigit() or not expiry.isdigit():
        return None
    if int(expiry) < (now or time.time()):
        return None
    return SessionClaim(kind, int(pk), fingerprint, sid)  # type: ignore[arg-type]


def principal_of(session: Session, claim: SessionClaim) -> Principal | None:
    """The person a valid claim names, if their session is still open and their credential is
    still the one they signed in with."""
    kept = session.get(WebSession, _sid_hash(claim.sid)) if claim.sid else None
    if kept is None or kept.kind != claim.kind or kept.principal_pk != claim.pk or kept.expires_at < utcnow():
        return None
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


def cookie_name(request: Request, name: str) -> str:
    """``name``, with the ``__Host-`` prefix over TLS (over plain HTTP, as on localhost, browsers
    refuse such a cookie, which needs Secure)."""
    return HOST_PREFIX + name if secure(request) else name


def session_cookie(request: Request) -> str:
    return request.cookies.get(cookie_name(request, SESSION_COOKIE), "")


def session_claim(secret: bytes, request: Request) -> SessionClaim | None:
    """The request's session claim if its cookie is validly signed (the store not asked)."""
    return read_session(secret, session_cookie(request))


def set_session(response: Response, request: Request, value: str) -> None:
    response.set_cookie(cookie_name(request, SESSION_COOKIE), value, max_age=SESSION_MAX_AGE_S, path="/",
                        httponly=True, samesite="lax", secure=secure(request))


def clear_session(response: Response, request: Request) -> None:
    response.delete_cookie(cookie_name(request, SESSION_COOKIE), path="/", httponly=True, samesite="lax",
                           secure=secure(request))


def browser_id(request: Request) -> tuple[str, bool]:
    """This browser's CSRF cookie value, and whether it is new (then it must be set)."""
    value = request.cookies.get(cookie_name(request, CSRF_COOKIE), "")
    if len(value) == 43 and value.replace("-", "").replace("_", "").isalnum():
        return value, False
    return secrets.token_urlsafe(32), True


def set_browser_id(response: Response, request: Request, value: str) -> None:
    response.set_cookie(cookie_name(request, CSRF_COOKIE), value, path="/", httponly=True, samesite="lax",
                        secure=secure(request))


def csrf_binding(secret: bytes, request: Request, browser: str) -> str:
    """What this browser's forms are bound to: its session when signed in, else its CSRF cookie."""
    claim = session_claim(secret, request)
    return f"session.{claim.sid}" if claim is not None and claim.sid else f"browser.{browser}"


def csrf_token(secret: bytes, binding: str) -> str:
    return _sign(secret, f"csrf.{binding}")


def same_origin(request: Request) -> bool:
    """The request says it comes from this site: its ``Origin``, or without one its ``Referer``,
    is this site's. A request with neither is refused too: browsers send an Origin with every
    form POST, so one without comes from something that hides where it comes from."""
    origin = request.headers.get("origin")
    if origin is None:
        referer = request.headers.get("referer", "")
        where = urlparse(referer)
        if not where.scheme or not where.netloc:
            return False
        origin = f"{where.scheme}://{where.netloc}"
    return origin.rstrip("/") == _own_origin(request)


def csrf_ok(secret: bytes, request: Request, given: str) -> bool:
    """The form's token matches this browser's session (or, signed out, its CSRF cookie), and the
    request comes from this site."""
    if not same_origin(request):
        return False
    browser = request.cookies.get(cookie_name(request, CSRF_COOKIE), "")
    claim = session_claim(secret, request)
    if (claim is None or not claim.sid) and not browser:
        return False
    expected = csrf_token(secret, csrf_binding(secret, request, browser))
    return bool(given) and hmac.compare_digest(given, expected)


def _own_origin(request: Request) -> str:
    return f"{request.url.scheme}://{request.headers.get('host', request.url.netloc)}"
