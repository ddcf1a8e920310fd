"""How deeply a structured input nests, measured without recursion: a TOML or JSON document
nested thousands of levels deep makes Python's parsers (and everything that walks the result)
raise RecursionError. Inputs are checked against ``MAX_DEPTH`` and refused with a message."""

from __future__ import annotations

import re
from typing import Any

MAX_DEPTH = 32  # a rubric or an API body nests 3 or 4 levels; nothing legitimate comes near this
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(rb"[\[\]{}]")


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether a parsed value (dicts and lists) nests more than ``limit`` levels."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = list(item.values())
        elif isinstance(item, list | tuple):
            children = list(item)
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_too_deep(text: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text opens more than ``limit`` arrays or objects at once (checked on the text,
    before any parser reads it; strings, whatever brackets they hold, are skipped)."""
    depth = 0
    for bracket in _BRACKETS.findall(_STRING.sub(b"", text)):
        if bracket in (b"[", b"{"):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


# TOML's strings and comments (skipped: whatever they hold is text), then what cannot be in a key
_TOML_TEXT = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*')
_NOT_KEY = re.compile(r"[^A-Za-z0-9_. \t-]+")
_TOML_BRACKETS = re.compile(r"[\[\]{}]")


def toml_too_deep(text: str, limit: int = MAX_DEPTH) -> bool:
    """Whether TOML text nests more than ``limit`` levels: arrays and inline tables opened at once,
    or a dotted key of more than ``limit`` parts (``a.b.c = 1`` is three tables deep; tomllib
    takes time quadratic in their number). Checked on the text in linear time, before parsing."""
    bare = _TOML_TEXT.sub("x", text)
    if any(run.count(".") >= limit for run in _NOT_KEY.split(bare)):
        return True
    depth = 0
    for bracket in _TOML_BRACKETS.findall(bare):
        if bracket in "[{":
            depth += 1
            if depth > limit:
                return True
        else:
            depth = max(0, depth - 1)
    return False
