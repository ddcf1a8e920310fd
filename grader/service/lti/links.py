"""Signed values the LTI tool hands out and takes back, all HMAC-SHA256 with the service's session
secret (``web.sessions.load_secret``), each under its own purpose so no value passes as another.

- ``grader_link``: the custom parameter of an LMS link, naming a grader course and assignment.
  Only staff get it (the API, or deep linking), so nobody can attach an LMS course to a grader
  course by typing its name into a link's custom parameters.
- Short-lived cookies that carry a verified launch across a staff sign-in: an instructor's LTI
  identity waiting to be linked to a staff account, and a deep-linking request waiting for an
  assignment to be picked.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

LINK_PARAM = "grader_link"
SIG_CHARS = 32


def _sign(secret: bytes, purpose: str, payload: str) -> str:
    return hmac.new(secret, f"{purpose}\n{payload}".encode(), hashlib.sha256).hexdigest()[:SIG_CHARS]


def link_value(secret: bytes, course: str, assignment: str) -> str:
    """``<course>/<assignment>.<signature>``: the value of the ``grader_link`` custom parameter."""
    payload = f"{course}/{assignment}"
    return f"{payload}.{_sign(secret, 'lti-link', payload)}"


def read_link(secret: bytes, value: str) -> tuple[str, str] | None:
    """The (course, assignment) a ``grader_link`` value names, or None if it is not one we signed."""
    payload, _, signature = value.strip().rpartition(".")
    if not payload or not hmac.compare_digest(signature, _sign(secret, "lti-link", payload)):
        return None
    course, _, assignment = payload.partition("/")
    return (course, assignment) if course and assignment else None


def seal(secret: bytes, purpose: str, data: dict[str, Any], ttl_s: int) -> str:
    """``data`` as a signed, expiring cookie value (readable by the browser, not forgeable)."""
    body = base64.urlsafe_b64encode(json.dumps({"d": data, "exp": int(time.time()) + ttl_s},
                                               separators=(",", ":")).encode()).decode()
    return f"{body}.{_sign(secret, purpose, body)}"


def unseal(secret: bytes, purpose: str, value: str) -> dict[str, Any] | None:
    """What ``seal`` wrapped, if the value is ours, for this purpose, and not expired."""
    body, _, signature = value.rpartition(".")
    if not body or not hmac.compare_digest(signature, _sign(secret, purpose, body)):
        return None
    try:
        wrapped = json.loads(base64.urlsafe_b64decode(body.encode()))
    except ValueError:
        return None
    if not isinstance(wrapped, dict) or int(wrapped.get("exp", 0)) < time.time():
        return None
    data = wrapped.get("d")
    return data if isinstance(data, dict) else None
