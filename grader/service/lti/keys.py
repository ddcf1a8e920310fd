"""The tool's own signing keys: generated on first use, published at ``/lti/jwks``, rotatable.
After a rotation the previous key stays published (platforms cache JWKS) until the next one."""

from __future__ import annotations

import json
import secrets
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwt.algorithms import RSAAlgorithm
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.lti_tables import LtiKey
from ...results.tables import utcnow

PUBLISHED = 2  # the newest key signs; the one before it is still published for verifiers' caches


def _new_key(session: Session) -> LtiKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    key = LtiKey(kid=secrets.token_hex(16), private_pem=pem, created_at=utcnow())
    session.add(key)
    session.flush()
    return key


def _live(session: Session) -> list[LtiKey]:
    return list(session.scalars(select(LtiKey).where(LtiKey.retired_at.is_(None)).order_by(LtiKey.created_at.desc())))


def signing_key(session: Session) -> LtiKey:
    """The newest live key; the first one is made here on first use."""
    live = _live(session)
    return live[0] if live else _new_key(session)


def rotate(session: Session) -> LtiKey:
    """A new signing key; keys older than the last ``PUBLISHED`` are retired (no longer published)."""
    new = _new_key(session)
    for old in _live(session)[PUBLISHED:]:
        old.retired_at = utcnow()
    return new


def jwks(session: Session) -> dict[str, Any]:
    signing_key(session)
    keys = []
    for key in _live(session)[:PUBLISHED]:
        private = serialization.load_pem_private_key(key.private_pem.encode(), password=None)
        public = json.loads(RSAAlgorithm.to_jwk(private.public_key()))  # type: ignore[arg-type]
        keys.append(public | {"kid": key.kid, "alg": "RS256", "use": "sig"})
    return {"keys": keys}
