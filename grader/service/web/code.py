"""The part of a student's own code that a failing check points at, with line numbers.

A check's message starts with ``Called: <target>(...)``; the rubric's ``targets`` name the
classes and functions a module needs. The excerpt is the top-level ``class``/``def`` block (or
assignment) of the last code cell that defines that name, as the notebook's kept statements run
in order and a later definition wins. Only parsing: the notebook is read as ``grader grade``
reads it (``load_submission``), nothing of it runs, and every line reaches the page through the
autoescaped templates.
"""

from __future__ import annotations

import re
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path, PurePath

from ...errors import SubmissionError
from ...load import LoadLimits, load_submission
from ...models import CodeCell

MAX_LINES = 60
_CACHE_SIZE = 32
_cache: OrderedDict[str, tuple[CodeCell, ...]] = OrderedDict()
_lock = threading.Lock()


@dataclass(frozen=True)
class Excerpt:
    name: str
    cell: int  # 1-based position among all cells of the notebook
    lines: tuple[tuple[int, str], ...]  # (line number in the cell, text)
    truncated: bool


def code_cells(sha256: str, file_name: str, content: bytes) -> tuple[CodeCell, ...]:
    """The notebook's code cells (cached by content hash; empty if it cannot be read)."""
    with _lock:
        if sha256 in _cache:
            _cache.move_to_end(sha256)
            return _cache[sha256]
    suffix = PurePath(file_name).suffix.lower()
    with tempfile.TemporaryDirectory(prefix="grader-web-") as folder:
        path = Path(folder) / f"submission{suffix if suffix in ('.ipynb', '.py') else '.ipynb'}"
        path.write_bytes(content)
        try:
            cells = load_submission(path, LoadLimits(max_bytes=max(len(content), 1))).cells
        except SubmissionError:
            cells = ()
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


def excerpt(cells: tuple[CodeCell, ...], name: str) -> Excerpt | None:
    """The last top-level definition of ``name`` in the cells, with its lines numbered."""
    start = re.compile(rf"^(?:class|def|async\s+def)\s+{re.escape(name)}\b|^{re.escape(name)}\s*(?::[^=]*)?=(?!=)")
    for cell in reversed(cells):
        lines = cell.source.splitlines()
        begins = [i for i, line in enumerate(lines) if start.match(line)]
        if not begins:
            continue
        first = begins[-1]
        while first > 0 and lines[first - 1].startswith("@"):
            first -= 1
        end = _block_end(lines, begins[-1])
        shown_end = min(end, first + MAX_LINES)
        return Excerpt(name, cell.index, tuple((i + 1, lines[i]) for i in range(first, shown_end)), shown_end < end)
    return None


def _block_end(lines: list[str], head: int) -> int:
    """Index after the block starting at ``head``: up to the next non-blank line at column 0."""
    i = head + 1
    while i < len(lines) and (not lines[i].strip() or lines[i][:1].isspace() or lines[i].startswith((")", "]", "}"))):
        i += 1
    while i > head + 1 and not lines[i - 1].strip():
        i -= 1
    return i


def excerpts_for(message: str, targets: tuple[str, ...], cells: tuple[CodeCell, ...]) -> list[Excerpt]:
    return [e for name in named_targets(message, targets) if (e := excerpt(cells, name)) is not None]
