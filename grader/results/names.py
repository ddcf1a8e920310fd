"""Whitelisted names: a student id or file name from a submission never becomes a path or a
shell word unless it matches this, and on-disk names are always derived by the grader.

Ids may be full e-mail addresses (``bob@evil.example``): an identity is matched exactly, so the
whitelist keeps ``@`` and ``+`` rather than cutting an address down to its local part.
"""

from __future__ import annotations

import re

from ..models import shown

MAX_NAME = 128
SAFE_NAME = re.compile(rf"^[A-Za-z0-9_][A-Za-z0-9_.@+-]{{0,{MAX_NAME - 1}}}$")


def is_safe(name: str) -> bool:
    """True for ``[A-Za-z0-9_.@+-]{1,128}`` names that do not start with ``-``, ``.``, ``@`` or
    ``+``, nor hold ``..``."""
    return bool(SAFE_NAME.match(name)) and ".." not in name


def shown_name(name: str, limit: int = 80) -> str:
    """A student-controlled name for a message or a stored field: one line, control characters,
    bidi overrides and lone surrogates escaped (``grader.models.shown``), at most ``limit`` long."""
    return shown(name, one_line=True)[:limit]


def check_name(name: str, what: str) -> str | None:
    """None if ``name`` is safe, else why it is refused (without echoing control characters)."""
    if is_safe(name):
        return None
    return (f"{what} '{shown_name(name)}' is not a safe name (letters, digits, '_', '.', '@', '+', '-'; "
            f"at most {MAX_NAME}; no leading '.', '-', '@' or '+')")
