"""Load stage: read a notebook (``.ipynb``) or jupytext percent source (``.py``) into a Submission.

Nothing is executed here. Stored outputs, metadata and the kernelspec are discarded; only the
source of code cells survives. Every refusal is a one-line ``SubmissionError``. Caps are checked
before anything costs time per cell (an nbformat upgrade), and a jupytext header's YAML is never
parsed. The grader calls this through ``grader.intake``, in a worker bounded in time and memory.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SubmissionError
from .models import CodeCell, Submission, clean, shown
from .nbschema import validate_v4


@dataclass(frozen=True)
class LoadLimits:
    """Intake caps; the defaults suit one module's notebook with room to spare."""

    max_bytes: int = 5 * 1024 * 1024
    max_cells: int = 2000
    max_seconds: float = 10.0  # CPU time to load and extract one file (grader.intake)
    max_wall_seconds: float | None = None  # wall-clock deadline; None: 3 x max_seconds + 1, room for a busy machine
    max_memory_mb: int = 1024  # memory the parsers may use on top of the grading process's own


def load_submission(path: str | os.PathLike[str], limits: LoadLimits = LoadLimits()) -> Submission:
    """Read and validate ``path``; raise SubmissionError with a one-line reason if it cannot be graded."""
    p = Path(path)
    name = shown(p.name)
    suffix = p.suffix.lower()
    if p.is_dir() and not p.is_symlink():
        raise SubmissionError(f"{shown(str(p))}: is a directory; give a notebook file (grader batch grades a folder)")
    if suffix not in (".ipynb", ".py"):
        raise SubmissionError(
            f"{name}: unsupported file type {shown(suffix) or '(none)'!r}; give a .ipynb notebook "
            "or a jupytext percent .py source"
        )
    raw = _read_capped(p, limits.max_bytes)
    if not raw.strip():
        raise SubmissionError(f"{name}: is empty; save the notebook (File > Save) and give that file")
    if b"\x00" in raw:
        raise SubmissionError(f"{name}: contains NUL bytes; a notebook is UTF-8 text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SubmissionError(f"{name}: not UTF-8 text (byte {e.start})") from None
    if suffix == ".ipynb":
        cells, notes = _cells_from_ipynb(name, text, limits)
        fmt = "ipynb"
    else:
        cells, notes = _cells_from_percent_py(name, text, limits)
        fmt = "py"
    return Submission(
        file_name=name,
        sha256=hashlib.sha256(raw).hexdigest(),
        format=fmt,  # type: ignore[arg-type]
        cells=tuple(cells),
        notes=tuple(notes),
    )


def _read_capped(p: Path, max_bytes: int) -> bytes:
    name = shown(p.name)
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOFOLLOW: no symlinks.
        fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise SubmissionError(f"{shown(str(p))}: no such file") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise SubmissionError(f"{name}: is a symbolic link; give the file itself") from None
        raise SubmissionError(f"{name}: cannot be read ({e.strerror})") from None
    try:
        kind = os.fstat(fd).st_mode
        if stat.S_ISDIR(kind):
            raise SubmissionError(f"{name}: is a directory; give a notebook file")
        if not stat.S_ISREG(kind):
            raise SubmissionError(f"{name}: is not a regular file")
        with os.fdopen(os.dup(fd), "rb") as f:
            raw = f.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(raw) > max_bytes:
        raise SubmissionError(
            f"{name}: larger than the {max_bytes // 1024} KiB limit; clear the notebook's "
            "outputs (Kernel > Restart & Clear Output) and save again"
        )
    return raw


def _cells_from_ipynb(name: str, text: str, limits: LoadLimits) -> tuple[list[CodeCell], list[str]]:
    try:
        data = json.loads(text)
    except RecursionError:
        raise SubmissionError(f"{name}: JSON nested too deeply to be a notebook") from None
    except json.JSONDecodeError as e:
        raise SubmissionError(f"{name}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells", data.get("worksheets")), list):
        raise SubmissionError(f"{name}: not a Jupyter notebook (no list of cells)")
    _check_cell_count(name, _raw_cell_count(data), limits)  # before an upgrade, which costs time per cell
    notes: list[str] = []
    version = data.get("nbformat")
    if not isinstance(version, int) or version < 1 or version > 4:
        raise SubmissionError(f"{name}: unsupported nbformat version {version!r}; save it with Jupyter 4 or newer")
    nb = data if version == 4 else _upgrade(name, data, version)
    if version < 4:
        notes.append(f"upgraded from nbformat v{version}")
    reason = validate_v4(nb)
    if reason is not None:
        raise SubmissionError(f"{name}: not a valid notebook ({reason})")
    cells = nb["cells"]
    _check_cell_count(name, len(cells), limits)
    return _code_cells(((c["cell_type"], c["source"], c.get("execution_count")) for c in cells), notes), notes


def _raw_cell_count(data: dict[str, Any]) -> int:
    """Cells of a notebook of any version: v4 (and v1) list them at the top, v2-3 per worksheet."""
    count = len(data["cells"]) if isinstance(data.get("cells"), list) else 0
    for sheet in data.get("worksheets") or ():
        if isinstance(sheet, dict) and isinstance(sheet.get("cells"), list):
            count += len(sheet["cells"])
    return count


def _check_cell_count(name: str, count: int, limits: LoadLimits) -> None:
    if count > limits.max_cells:
        raise SubmissionError(f"{name}: has more than the {limits.max_cells}-cell limit")


def _code_cells(cells: Any, notes: list[str]) -> list[CodeCell]:
    """The code cells, numbered among all cells; text no encoder accepts is made visible (noted)."""
    out, replaced = [], []
    for i, (kind, source, count) in enumerate(cells, start=1):
        if kind != "code":
            continue
        text = _source(source)
        safe = clean(text)
        if safe != text:
            replaced.append(str(i))
        shown_count = count if type(count) is int and 0 < count < 10**9 else None
        out.append(CodeCell(index=i, source=safe, execution_count=shown_count))
    if replaced:
        notes.append(f"cell {', '.join(replaced)}: lone surrogate characters (not valid text) were replaced by "
                     "visible escapes")
    return out


def _upgrade(name: str, data: dict[str, Any], version: int) -> dict[str, Any]:
    import nbformat  # only old notebooks pay for nbformat's converters

    try:
        return dict(nbformat.convert(nbformat.from_dict(data), 4))
    except Exception as e:  # nbformat's converters raise assorted errors on odd old files
        raise SubmissionError(f"{name}: cannot upgrade this nbformat v{version} notebook ({str(e)[:120]})") from None


def _cells_from_percent_py(name: str, text: str, limits: LoadLimits) -> tuple[list[CodeCell], list[str]]:
    # Before jupytext, whose time grows with the number of cells: each marker line starts a cell.
    _check_cell_count(name, _percent_markers(text), limits)
    import jupytext  # deferred: only .py sources need it

    try:
        nb = jupytext.reads(_without_header_yaml(text), fmt="py:percent")
    except Exception as e:  # jupytext raises assorted errors on malformed headers
        raise SubmissionError(f"{name}: cannot be read as a jupytext percent file ({str(e)[:120]})") from None
    _check_cell_count(name, len(nb.cells), limits)
    notes: list[str] = []
    return _code_cells(((c.cell_type, c.source, None) for c in nb.cells), notes), notes


# The lines jupytext's percent reader starts a cell at (its start_code_re and alternative_start_code_re).
_CELL_MARKER = re.compile(r"^[ \t]*#[ \t]*(?:%%+[ \t\f\v].*|%%|<codecell>|In\[[0-9 ]*\]:?)[ \t\f\v]*$", re.MULTILINE)


def _percent_markers(text: str) -> int:
    """How many cell markers a percent source has: a count in one linear pass over the text."""
    return sum(1 for _ in _CELL_MARKER.finditer(text.replace("\r", "\n")))


_HEADER_MARKER = re.compile(r"^---\s*$")
_JUPYTER_KEY = re.compile(r"^jupyter\s*:\s*$")
_ENCODING = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-_.a-zA-Z0-9]+)")


def _without_header_yaml(text: str) -> str:
    """``text`` without the ``jupyter:`` section of its header, the only YAML jupytext would parse.

    That section holds only notebook metadata, which is discarded anyway, and YAML is a hazard:
    anchors and aliases expand exponentially (a 1 KB header can take minutes and gigabytes).
    The header is found as jupytext finds it: after an optional ``#!`` line and coding line, a
    block of comment lines between two ``# ---`` lines. Other lines stay, so cells keep their
    numbers.
    """
    lines = text.splitlines(keepends=True)
    started, in_jupyter, drop = False, False, set[int]()
    for i, line in enumerate(lines):
        if i == 0 and line.startswith("#!"):
            continue
        if (i == 0 or (i == 1 and not _ENCODING.match(lines[0]))) and _ENCODING.match(line):
            continue
        if not line.startswith("#"):
            return text
        body = _uncomment(line.rstrip("\r\n"))
        if _HEADER_MARKER.match(body):
            if started:
                return "".join(x for n, x in enumerate(lines) if n not in drop)
            started = True
            continue
        if not started and body.strip():
            return text
        if _JUPYTER_KEY.match(body):
            in_jupyter = True
        elif body and not body[0].isspace():
            in_jupyter = False
        if in_jupyter:
            drop.add(i)
    return text


def _uncomment(line: str) -> str:
    return line[2:] if line.startswith("# ") else line[1:]


def _source(src: Any) -> str:
    return "".join(src) if isinstance(src, list) else str(src)
