"""The one trusted result channel: read what a sandbox wrote, validating every byte.

Only ``out/*.json`` (size-capped, pydantic-validated) and ``out/<check>/<name>.npy`` (parsed by
hand: exact ndarray, numeric dtype, the expected shape, finite) are ever read. Stdout, stderr,
exit status and any other file are ignored for scoring. Anything malformed counts as missing.
Every string read is made safe to store and print (``models.shown``): the student's process
chooses them.
"""

from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import IO, Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

from .models import Record, map_strings, shown

MAX_JSON_BYTES = 256 * 1024
MAX_ARRAY_BYTES = 32 * 1024 * 1024
_R = TypeVar("_R", bound=Record)
_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_NPY_MAGIC = b"\x93NUMPY"
_NPY_MAX_HEADER = 4096  # numpy writes about 128 bytes
_NPY_DESCR = re.compile(r"^[<>|=]?(b1|[iu][1248]|f[248])$")
_NPY_MAX_DIMS = 32

Scalar = StrictBool | StrictInt | StrictFloat | Annotated[StrictStr, Field(max_length=1000)] | None
Fact = Scalar | Annotated[list[StrictBool | StrictInt | StrictFloat | Annotated[StrictStr, Field(max_length=200)]],
                          Field(max_length=64)]


class ErrorInfo(Record):
    type: Annotated[str, Field(max_length=80)]
    message: Annotated[str, Field(max_length=1000)]
    where: Annotated[str, Field(max_length=200)] | None = None

    def text(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{self.type}: {self.message}{at}" if self.message else f"{self.type}{at}"


class ChunkError(Record):
    cell: int
    line: int
    defines: tuple[Annotated[str, Field(max_length=200)], ...] = Field(default=(), max_length=64)
    error: ErrorInfo


class ImportRecord(Record):
    chunk_errors: tuple[ChunkError, ...] = Field(max_length=10_000)
    defined: tuple[Annotated[str, Field(max_length=200)], ...] = Field(max_length=100_000)


class ProbeRecord(Record):
    check: str
    status: Literal["ok", "error", "oom"]
    facts: dict[str, Fact] = Field(default_factory=dict, max_length=256)
    arrays: tuple[str, ...] = Field(default=(), max_length=256)
    error: ErrorInfo | None = None
    duration_ms: float = 0.0


class StatusRecord(Record):
    check: str
    status: Literal["timeout", "crashed", "oom"]
    signal: int | None = None
    exit_code: int | None = None
    reason: Annotated[str, Field(max_length=200)] | None = None
    duration_ms: float = 0.0


Outcome = Literal["ok", "error", "oom", "timeout", "crashed", "missing"]


class CheckOutput(Record):
    """One check's outputs after validation; arrays hold only names the reference produced."""

    model_config = Record.model_config | {"arbitrary_types_allowed": True}

    outcome: Outcome
    facts: dict[str, Fact] = Field(default_factory=dict)
    arrays: dict[str, np.ndarray] = Field(default_factory=dict)
    rejected: dict[str, str] = Field(default_factory=dict)
    error: ErrorInfo | None = None
    duration_ms: float = 0.0
    note: str = ""


def read_import(out_dir: Path) -> ImportRecord | None:
    return _read_json(out_dir / "import.json", ImportRecord)


def read_check(out_dir: Path, check_id: str, expected_shapes: dict[str, tuple[int, ...]] | None) -> CheckOutput:
    """Validated outputs of one check. ``expected_shapes=None`` reads a trusted reference run."""
    record = _read_json(out_dir / f"{check_id}.json", ProbeRecord)
    status = _read_json(out_dir / f"{check_id}.status.json", StatusRecord)
    if status is not None and (record is None or status.status == "timeout"):
        note = {"timeout": "", "oom": "killed (out of memory)",
                "crashed": _crash_note(status)}[status.status]
        return CheckOutput(outcome=status.status, duration_ms=status.duration_ms, note=note)
    if record is None or record.check != check_id:
        return CheckOutput(outcome="missing", note="no valid result was written for this check")
    if record.status != "ok":
        return CheckOutput(outcome=record.status, error=record.error, duration_ms=record.duration_ms)
    arrays: dict[str, np.ndarray] = {}
    rejected: dict[str, str] = {}
    wanted = expected_shapes if expected_shapes is not None else {n: None for n in record.arrays}
    for name, shape in wanted.items():
        if name not in record.arrays or not _NAME.match(name):
            continue
        try:
            arrays[name] = read_npy(out_dir / check_id / f"{name}.npy", shape)
        except ValueError as e:
            rejected[name] = str(e)
    return CheckOutput(outcome="ok", facts=record.facts, arrays=arrays, rejected=rejected,
                       duration_ms=record.duration_ms)


def read_npy(path: Path, shape: tuple[int, ...] | None) -> np.ndarray:
    """A float64 ndarray from a ``.npy`` file, refusing anything but plain finite numbers."""
    if path.is_symlink() or not path.is_file():
        raise ValueError("no array file was written")
    size = path.stat().st_size
    if size > MAX_ARRAY_BYTES:
        raise ValueError(f"array file is too large ({size} bytes)")
    with path.open("rb") as f:
        got_shape, fortran, dtype = _npy_header(f)
        if shape is not None and got_shape != tuple(shape):
            raise ValueError(f"shape {got_shape} differs from the expected {tuple(shape)}")
        count = math.prod(got_shape)
        if count == 0:
            raise ValueError("the array is empty")
        if count * dtype.itemsize > MAX_ARRAY_BYTES:
            raise ValueError(f"array of shape {got_shape} is too large")
        data = f.read(count * dtype.itemsize + 1)
    if len(data) != count * dtype.itemsize:
        raise ValueError("the array file is truncated or has trailing data")
    array = np.frombuffer(data, dtype=dtype).reshape(got_shape, order="F" if fortran else "C")
    out = np.array(array, dtype=np.float64, copy=True)
    if type(out) is not np.ndarray or not np.all(np.isfinite(out)):
        raise ValueError("the array contains NaN or infinite values")
    return out


def _npy_header(f: IO[bytes]) -> tuple[tuple[int, ...], bool, np.dtype[Any]]:
    """(shape, fortran order, dtype) of a ``.npy`` header, parsed here rather than by numpy, so that
    only a plain dict of exactly these three plain values gets through; ValueError otherwise."""
    prefix = f.read(8)
    if len(prefix) != 8 or not prefix.startswith(_NPY_MAGIC) or prefix[6] not in (1, 2, 3):
        raise ValueError("not a valid .npy file (no .npy magic and version)")
    width = 2 if prefix[6] == 1 else 4
    length = int.from_bytes(f.read(width), "little")
    if length > _NPY_MAX_HEADER:
        raise ValueError(f"not a valid .npy file (header of {length} bytes)")
    raw = f.read(length)
    try:
        header = ast.literal_eval(raw.decode("utf-8" if prefix[6] == 3 else "latin-1"))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError, UnicodeDecodeError):
        raise ValueError("not a valid .npy file (unreadable header)") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError("not a valid .npy file (header is not descr, fortran_order and shape)")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str) or not _NPY_DESCR.match(descr):
        raise ValueError(f"dtype {shown(repr(descr))[:60]} is not a plain number type")
    if (type(fortran) is not bool or type(shape) is not tuple or len(shape) > _NPY_MAX_DIMS
            or not all(type(n) is int and n >= 0 for n in shape)):
        raise ValueError("not a valid .npy file (bad fortran_order or shape)")
    return shape, fortran, np.dtype(descr)


def _crash_note(status: StatusRecord) -> str:
    if status.reason:
        return status.reason
    if status.signal is not None:
        return f"the process was killed by signal {status.signal} (a segfault or abort in native code?)"
    return (f"the process exited with status {status.exit_code} before reporting a result "
            "(sys.exit or os._exit in your code?)")


def _read_json(path: Path, model: type[_R]) -> _R | None:
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_JSON_BYTES:
            return None
        return model.model_validate(map_strings(json.loads(path.read_bytes()), _shown))
    except (OSError, ValueError, RecursionError, ValidationError):
        return None


def _shown(text: str) -> str:
    """``text`` made safe to store and print. Escapes lengthen a string: it is cut back to its
    length (at least the smallest length cap of the schema, 80), so that a string within its cap
    stays within it."""
    return shown(text)[: max(len(text), 80)]
