"""Whitelisted names: a student id or file name from a submission never becomes a path or a
shell word unless it matches this, and on-disk names are always derived by the grader."""

from __future__ import annotations

import re

SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


def is_safe(name: str) -> bool:
    """True for ``[A-Za-z0-9_.-]{1,64}`` names that do not start with ``-`` or ``.``, nor hold ``..``."""
    return bool(SAFE_NAME.match(name)) and ".." not in name


def check_name(name: str, what: str) -> str | None:
    """None if ``name`` is safe, else why it is refused (without echoing control characters)."""
    if is_safe(name):
        return None
    shown = name.encode("unicode_escape").decode("ascii")[:80]
    return f"{what} {shown!r} is not a safe name (letters, digits, '_', '.', '-'; at most 64; no leading '.' or '-')"
