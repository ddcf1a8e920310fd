"""Typed records passed between pipeline stages (load → extract → plan → sandbox → judge → score)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_JOINERS = "\u200c\u200d"  # zero-width (non-)joiner: part of Persian, Indic and emoji spellings, inert


def shown(text: str, *, one_line: bool = False) -> str:
    """Student-controlled text (file and archive member names, ids, exception messages) made
    safe to print or store: every character a terminal, log viewer or JSON encoder could obey or
    choke on becomes a visible escape (``\\x1b``, ``\\r``, ``\\u202e``, ``\\ud800``): C0 and C1
    controls (ANSI/OSC sequences lose their ESC), bidi overrides and other format characters,
    line separators and lone surrogates (an undecodable byte of a file name shows as ``\xff``).
    Newlines and tabs stay unless ``one_line`` (names)."""
    keep = _JOINERS if one_line else _JOINERS + "\n\t"
    return "".join(ch if ch.isprintable() or ch in keep else _escape(ch) for ch in clean(text))


def _escape(ch: str) -> str:
    code = ord(ch)
    if ch in _NAMED:
        return _NAMED[ch]
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

_SURROGATE = re.compile("[\ud800-\udfff]")


def clean(text: str) -> str:
    """Student-controlled text that every encoder accepts (UTF-8, JSON, SQLite): each lone
    surrogate becomes a visible escape, ``\\xNN`` for an undecodable byte of a file name
    (Python's surrogateescape), ``\\udNNN`` for one that came from a JSON ``\\u`` escape."""
    return _SURROGATE.sub(_escape_surrogate, text) if _SURROGATE.search(text) else text


def _escape_surrogate(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else f"\\u{code:04x}"


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """``value`` (plain data: dicts, lists, tuples, scalars) with ``fn`` applied to every string,
    dictionary keys included; tuples become lists."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {map_strings(k, fn): map_strings(v, fn) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_strings(v, fn) for v in value]
    return value



CheckStatus = Literal["passed", "failed", "error", "timeout", "crashed", "oom", "not_gradable"]
Visibility = Literal["visible", "hidden", "after_due_date", "after_published"]


class Record(BaseModel):
    """Base of every record: immutable, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")


# ---- load -----------------------------------------------------------------------------------


class CodeCell(Record):
    """One code cell; ``index`` is its 1-based position among all cells of the notebook (the
    grader's own key for it); ``execution_count`` the ``In [n]`` Jupyter shows beside it, if any."""

    index: int
    source: str
    execution_count: int | None = None


def cell_labels(cells: Sequence[CodeCell]) -> dict[int, str]:
    """How a student finds each code cell: ``In [n]`` as Jupyter shows it when the notebook was run,
    else the cell's first line of code ("the cell starting `class Layer:`")."""
    labels = {}
    for cell in cells:
        if cell.execution_count is not None:
            labels[cell.index] = f"In [{cell.execution_count}]"
            continue
        lines = [line.strip() for line in cell.source.splitlines()]
        first = next((line for line in lines if line and not line.startswith("#")), "")
        labels[cell.index] = f"the cell starting `{first[:40]}`" if first else f"code cell at position {cell.index}"
    return labels


class Submission(Record):
    """A loaded, validated submission: only its code cells survive loading."""

    file_name: str
    sha256: str
    format: Literal["ipynb", "py"]
    cells: tuple[CodeCell, ...]
    notes: tuple[str, ...] = ()


# ---- extract --------------------------------------------------------------------------------


class Chunk(Record):
    """Kept top-level statements of one cell, executed as one unit in the sandbox."""

    cell: int
    line: int
    source: str
    defines: tuple[str, ...]
    modifies: tuple[str, ...] = ()  # those of ``defines`` it changes without rebinding: ``Layer.forward = f``


DropKind = Literal["magic", "shell", "call", "loop", "print", "main_block", "unused", "other"]


class Dropped(Record):
    """Something the extractor removed, and why."""

    cell: int
    line: int
    kind: DropKind
    detail: str


class CellSyntaxError(Record):
    """A cell that does not parse; its code is left out, the other cells are still used."""

    cell: int
    line: int
    message: str


class StudentCode(Record):
    """The self-contained student code the sandbox imports, and what extraction did to get it."""

    chunks: tuple[Chunk, ...]
    target_cells: dict[str, tuple[int, ...]]
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    syntax_errors: tuple[CellSyntaxError, ...]
    notes: tuple[str, ...] = ()

    def source(self) -> str:
        """The module as one file, for people to read."""
        return "\n\n".join(f"# --- cell {c.cell} ---\n{c.source}" for c in self.chunks) + "\n"


# ---- report ---------------------------------------------------------------------------------


class Figure(Record):
    """A small 2-D output beside the reference's, for pictures in feedback reports."""

    name: str
    got: tuple[tuple[float, ...], ...]
    expected: tuple[tuple[float, ...], ...]


class CheckResult(Record):
    """The verdict on one rubric check.

    ``message`` is safe to show the student under the check's visibility rules;
    ``detail`` is the full diagnosis for staff (identical for visible checks).
    ``student_text`` is text the code under test wrote itself (an exception's message), kept apart
    for visible checks: message and detail show it only as a quoted block, never as our words.
    """

    id: str
    title: str
    status: CheckStatus
    score: float
    max_score: float
    visibility: Visibility
    message: str
    detail: str = ""
    duration_ms: Annotated[float, Field(ge=0.0, allow_inf_nan=False)] = 0.0  # JSON has no NaN: reports must reload
    figures: tuple[Figure, ...] = ()
    student_text: str = ""


class BackendInfo(Record):
    """Where and how student code ran."""

    name: Literal["local", "docker", "inprocess"]
    label: Literal["practice", "official", "trusted"]
    isolation: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    image: str | None = None
    limits: dict[str, float | int | str] = Field(default_factory=dict)


class ExtractionSummary(Record):
    kept: tuple[str, ...]
    dropped: tuple[Dropped, ...]
    syntax_errors: tuple[CellSyntaxError, ...]
    import_errors: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  # how the notebook was read: upgrades, replaced characters, redefinitions


class GradeReport(Record):
    """The score report of one submission; identical for identical input apart from timings."""

    schema_version: int = SCHEMA_VERSION
    submission: str
    sha256: str
    rubric_id: str
    rubric_hash: str
    grader_version: str
    seed: int
    backend: BackendInfo
    extraction: ExtractionSummary
    checks: tuple[CheckResult, ...]
    score: float
    max_score: float

    @property
    def all_passed(self) -> bool:
        return bool(self.checks) and all(c.status == "passed" for c in self.checks)
