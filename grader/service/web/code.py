"""The part of a student's own code that a failing check points at, with line numbers.

A check's message starts with ``Called: <target>(...)``; the rubric's ``targets`` name the
classes and functions a module needs. The excerpt is the top-level ``class``/``def`` block (or
assignment) of the last code cell that defines that name, as the notebook's kept statements run
in order and a later definition wins. Only parsing: the notebook is read as ``grader grade``
reads it (``load_submission``, in a bounded intake worker: ``uploads.load_cells``), nothing of
it runs, and every line reaches the page through the autoescaped templates.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import PurePath

from ...errors import Busy, SubmissionError
from ...load import LoadLimits
from ...models import CodeCell, cell_labels
from ..uploads import load_cells

MAX_LINES = 60
_CACHE_SIZE = 32
_cache: OrderedDict[str, tuple[CodeCell, ...]] = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class Excerpt:
    name: str  # the target, or "Target.method" when the excerpt is one method of it
    cell: str  # the cell as the student finds it: "In [7]", or "the cell starting `class Layer:`"
    lines: tuple[tuple[int, str], ...]  # (line number in the cell, text)
    truncated: bool
    focus: int | None = None  # the line the failure points at (a traceback's, or a likely cause's)


def code_cells(sha256: str, file_name: str, content: bytes) -> tuple[CodeCell, ...]:
    """The notebook's code cells (cached by content hash; empty if it cannot be read)."""
    with _lock:
        if sha256 in _cache:
            _cache.move_to_end(sha256)
            return _cache[sha256]
    suffix = PurePath(file_name).suffix.lower()
    name = f"submission{suffix if suffix in ('.ipynb', '.py') else '.ipynb'}"
    try:
        cells = load_cells(name, content, LoadLimits(max_bytes=max(len(content), 1))).cells
    except SubmissionError:
        cells = ()
    except Busy:  # the readers are busy: no excerpt this time (not cached)
        return ()
    with _lock:
        _cache[sha256] = cells
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return cells


def named_targets(message: str, targets: tuple[str, ...]) -> list[str]:
    """The rubric targets the check's ``Called:`` line names, in the order they appear there."""
    first = message.splitlines()[0] if message else ""
    if not first.startswith("Called: "):
        return []
    found = [(m.start(), t) for t in targets if (m := re.search(rf"\b{re.escape(t)}\b", first))]
    return [t for _, t in sorted(found)]


_DEF = re.compile(r"^(?P<indent>\s*)(?:async\s+)?def\s+(?P<name>\w+)")
# where a check's message points: "(In [7], line 12, in forward)", "(cell 5, line 12, in forward)",
# "(the cell starting `class Layer:`, line 12, in forward)"
_PLACE = re.compile(r"(In \[\d+\]|the cell starting `[^`]*`|code cell at position \d+|cell \d+), line (\d+), in (\w+)")
# the method a likely cause is about, when it names no line: the first of these words it uses
_METHOD_WORDS = (("backward", "backward"), ("gradient", "backward"), ("start_pos", "forward"), ("forward", "forward"),
                 ("__call__", "__call__"), ("parameters()", "parameters"), ("__init__", "__init__"),
                 ("created", "__init__"), ("drawn", "__init__"), ("initiali", "__init__"))


def excerpt(cells: tuple[CodeCell, ...], name: str, method: str | None = None) -> Excerpt | None:
    """The last top-level definition of ``name`` in the cells, with its lines numbered; only its
    ``method`` when it has one of that name."""
    start = re.compile(rf"^(?:class|def|async\s+def)\s+{re.escape(name)}\b|^{re.escape(name)}\s*(?::[^=]*)?=(?!=)")
    labels = cell_labels(cells)
    for cell in reversed(cells):
        lines = cell.source.splitlines()
        begins = [i for i, line in enumerate(lines) if start.match(line)]
        if not begins:
            continue
        first = begins[-1]
        while first > 0 and lines[first - 1].startswith("@"):
            first -= 1
        end = _block_end(lines, begins[-1])
        inner = _method(lines, begins[-1], end, method) if method else None
        if inner is not None:
            return _window(f"{name}.{method}", labels[cell.index], lines, *inner, None)
        return _window(name, labels[cell.index], lines, first, end, None)
    return None


def _method(lines: list[str], first: int, end: int, method: str) -> tuple[int, int] | None:
    """The (first, end) lines of ``def method`` inside the block from ``first`` to ``end``."""
    for i in range(first + 1, end):
        m = _DEF.match(lines[i])
        if m and m["name"] == method and m["indent"]:
            return i, _block_end(lines, i, len(m["indent"]))
    return None


def _window(name: str, label: str, lines: list[str], first: int, end: int, focus: int | None) -> Excerpt:
    """Lines first .. end-1 of a cell, at most MAX_LINES of them, centred on ``focus`` (0-based)."""
    start = first if focus is None else max(first, min(focus - MAX_LINES // 2, end - MAX_LINES))
    shown_end = min(end, start + MAX_LINES)
    return Excerpt(name, label, tuple((i + 1, lines[i]) for i in range(start, shown_end)),
                   start > first or shown_end < end, None if focus is None else focus + 1)


def _block_end(lines: list[str], head: int, indent: int = 0) -> int:
    """Index after the block starting at ``head``: up to the next non-blank line indented ``indent``
    columns or less (a closing bracket at that indent still belongs to the head)."""
    i = head + 1
    while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
                              or lines[i].lstrip().startswith((")", "]", "}"))):
        i += 1
    while i > head + 1 and not lines[i - 1].strip():
        i -= 1
    return i


def _at_place(message: str, cells: tuple[CodeCell, ...]) -> Excerpt | None:
    """The function a traceback or a likely cause names by its line, centred on that line."""
    labels = cell_labels(cells)
    for where, line_text, function in _PLACE.findall(message):
        line = int(line_text) - 1
        for cell in reversed(cells):
            if where not in (labels[cell.index], f"cell {cell.index}"):
                continue
            lines = cell.source.splitlines()
            if not 0 <= line < len(lines):
                continue
            head = next((i for i in range(line, -1, -1) if (m := _DEF.match(lines[i])) and m["name"] == function), None)
            if head is None:
                continue
            indent = len(lines[head]) - len(lines[head].lstrip())
            return _window(function, labels[cell.index], lines, head, _block_end(lines, head, indent), line)
    return None


def _method_named(message: str) -> str | None:
    cause = next((line for line in message.splitlines() if line.startswith("Likely cause: ")), "")
    hits = [(cause.find(word), method) for word, method in _METHOD_WORDS if word in cause]
    return min(hits)[1] if hits else None


def excerpts_for(message: str, targets: tuple[str, ...], cells: tuple[CodeCell, ...]) -> list[Excerpt]:
    """What of the student's code a failing check points at: the function its traceback or likely
    cause names by line (centred there), else the method its likely cause is about (a backward of
    any class that has one, since the newer course puts it in its own Function), else each target
    the check called."""
    placed = _at_place(message, cells)
    if placed is not None:
        return [placed]
    method = _method_named(message)
    named = named_targets(message, targets)
    if method is not None:  # the method itself, of the first class that has it (the targets first)
        classes = [m[1] for cell in reversed(cells) for m in re.finditer(r"^class\s+(\w+)", cell.source, re.M)]
        for name in dict.fromkeys([*named, *(classes if method == "backward" else ())]):
            found = excerpt(cells, name, method)
            if found is not None and "." in found.name:
                return [found]
    return [e for name in named if (e := excerpt(cells, name)) is not None]
