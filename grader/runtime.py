"""The course runtimes that units share (``reference/runtime/<name>/``), each named and versioned.

A runtime's ``RUNTIME.toml`` gives its version (``major.minor``) and the hash of its code. A unit
says which runtime it runs on and the version it was written against (``ModuleUnit.runtime`` and
``runtime_version``): it runs on that major and that minor or a later one. Whoever changes a
runtime's code bumps its version there (``tests/test_runtime_version.py`` holds the recorded hash
to the code): the minor when the change only adds (a class, a method, an argument with a default),
the major when it changes or removes what exists, and then every unit on the old major is
re-checked and moved up by hand. Standard library only (units are found before any dependency).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Protocol

from .errors import ModuleUnitError
from .paths import runtime_dir

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the student package supports it): the same parser, as tomli
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]

RECORD = "RUNTIME.toml"


@dataclass(frozen=True)
class Runtime:
    name: str
    version: tuple[int, int]
    content: str  # the recorded hash of its code

    @property
    def label(self) -> str:
        return f"{self.name} {self.version[0]}.{self.version[1]}"


def parse_version(text: str, where: str) -> tuple[int, int]:
    major, dot, minor = text.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise ModuleUnitError(f"{where}: version {text!r} is not major.minor (for example \"1.2\")")
    return int(major), int(minor)


def root(name: str) -> Path:
    return runtime_dir() / name


def content_hash(name: str) -> str:
    """The hash of the runtime's code as it is now: its ``.py`` files, by path."""
    h = hashlib.sha256()
    base = root(name)
    for f in sorted(base.rglob("*.py")):
        if "__pycache__" not in f.parts:
            h.update(f.relative_to(base).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@cache
def declared(name: str) -> Runtime:
    """The runtime's ``RUNTIME.toml``, read once per process (every job planned asks)."""
    path = root(name) / RECORD
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ModuleUnitError(f"course runtime {name!r}: no readable {path} ({e}); every runtime in "
                              f"{runtime_dir()} records its version there") from e
    version, content = data.get("version"), data.get("content")
    if not isinstance(version, str) or not isinstance(content, str):
        raise ModuleUnitError(f"course runtime {name!r}: {path} needs `version = \"major.minor\"` and `content`")
    return Runtime(name, parse_version(version, str(path)), content)


class UnitNeeds(Protocol):
    """What a unit says of its runtime (grader.unit.ModuleUnit has it)."""

    @property
    def name(self) -> str: ...
    @property
    def runtime(self) -> str: ...
    @property
    def runtime_version(self) -> str: ...


def require(unit: UnitNeeds) -> Runtime:
    """The runtime ``unit`` runs on, if this install's version of it is one the unit was written for."""
    if not root(unit.runtime).is_dir():
        raise ModuleUnitError(f"module unit {unit.name!r} runs on course runtime {unit.runtime!r}, which this install "
                              f"does not have (runtimes: {', '.join(sorted(available())) or 'none'})")
    have = declared(unit.runtime)
    need = parse_version(unit.runtime_version, f"module unit {unit.name!r}: runtime_version")
    if have.version[0] != need[0] or have.version[1] < need[1]:
        raise ModuleUnitError(
            f"module unit {unit.name!r} was written for course runtime {unit.runtime} {unit.runtime_version}, and "
            f"this install has {have.label}: install the grader release whose runtime is {need[0]}.{need[1]} or a "
            f"later {need[0]}.x, or update the unit and its runtime_version")
    return have


def available() -> list[str]:
    return [p.name for p in runtime_dir().iterdir() if (p / RECORD).is_file()] if runtime_dir().is_dir() else []
