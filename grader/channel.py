"""The one trusted result channel: read what a sandbox wrote, validating every byte.

Only ``out/*.json`` (size-capped, pydantic-validated) and ``out/<check>/<name>.npy`` (parsed by
hand: exact ndarray, numeric dtype, the expected shape, finite) are ever read. Stdout, stderr,
exit status and any other file are ignored for scoring. Anything malformed counts as missing, except
in a trusted reference run: an output the host cannot read there is a fault of the unit (an output
name outside ``[A-Za-z0-9_]{1,64}``, say), raised as ``HarnessProtocolError`` for the staff, never a
comparison silently dropped.
Every string read is made safe to store and print (``models.shown``): the student's process
chooses them.
"""

from __future__ import annotations

import ast
import io
import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Annotated, Any, Literal, TypeVar

import numpy as np
from pydantic import Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError, field_validator

from .errors import HarnessProtocolError
from .harness.records import IMPORT, SCHEMA, check_file, status_file
from .models import Record, map_strings, shown

MAX_JSON_BYTES = 256 * 1024
MAX_ARRAY_BYTES = 32 * 1024 * 1024
MAX_FILES = 4096
_R = TypeVar("_R", bound=Record)
_NAME = re.compile(r"^[A-Za-z0-9_]{1,64}$")
_NPY_MAGIC = b"\x93NUMPY"
_NPY_MAX_HEADER = 4096  # numpy writes about 128 bytes
_NPY_DESCR = re.compile(r"^[<>|=]?(b1|[iu][1248]|f[248])$")
_NPY_MAX_DIMS = 32

# A time the sandbox reports: finite (NaN or infinity would reach the report, which JSON then cannot
# carry: the stored report of the whole class would no longer load) and never negative.
Duration = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]
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


class _Versioned(Record):
    """A record the harness wrote (grader/harness/records.py): refused unless of this schema."""

    model_config = Record.model_config | {"populate_by_name": True}

    schema_version: int = Field(alias="schema")

    @field_validator("schema_version")
    @classmethod
    def _same_schema(cls, value: int) -> int:
        if value != SCHEMA:
            raise ValueError(f"result schema {value}, expected {SCHEMA}")
        return value


class ImportRecord(_Versioned):
    chunk_errors: tuple[ChunkError, ...] = Field(max_length=10_000)
    defined: tuple[Annotated[str, Field(max_length=200)], ...] = Field(max_length=100_000)


class ProbeRecord(_Versioned):
    check: str
    status: Literal["ok", "error", "oom"]
    facts: dict[str, Fact] = Field(default_factory=dict, max_length=256)
    arrays: tuple[str, ...] = Field(default=(), max_length=256)
    error: ErrorInfo | None = None
    duration_ms: Duration = 0.0


class StatusRecord(_Versioned):
    check: str
    status: Literal["timeout", "crashed", "oom"]
    signal: Annotated[int, Field(ge=1, le=128)] | None = None
    exit_code: Annotated[int, Field(ge=0, le=255)] | None = None
    reason: Annotated[str, Field(max_length=200)] | None = None
    duration_ms: Duration = 0.0


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
    note: str = ""  # the host's own account of what happened (a deadline, a crash's reason)
    signal: int | None = None  # for a crash: the signal that killed the check's process
    exit_code: int | None = None  # for a crash: its exit status


Outputs = Mapping[str, bytes]  # what a sandbox run returned: ``out/``'s files by relative name


def outputs_from_dir(out_dir: Path) -> dict[str, bytes]:
    """The regular files of an ``out/`` folder (``name`` and ``check/name``; never a link), each read
    through the size cap; for runs written to disk (the reference's cache, tests)."""
    files: dict[str, bytes] = {}
    if out_dir.is_symlink() or not out_dir.is_dir():
        return files
    for entry in sorted(out_dir.iterdir())[:MAX_FILES]:
        for path in ([entry] if not entry.is_dir() or entry.is_symlink() else sorted(entry.iterdir())[:MAX_FILES]):
            try:
                if not path.is_symlink() and path.is_file() and path.stat().st_size <= MAX_ARRAY_BYTES + 4096:
                    files[path.relative_to(out_dir).as_posix()] = path.read_bytes()
            except OSError:
                continue
    return files


def _files(outputs: Outputs | Path) -> Outputs:
    return outputs_from_dir(outputs) if isinstance(outputs, Path) else outputs


def read_import(outputs: Outputs | Path) -> ImportRecord | None:
    return _read_json(_files(outputs).get(IMPORT), ImportRecord)


def read_check(outputs: Outputs | Path, check_id: str,
               expected_shapes: dict[str, tuple[int, ...]] | None) -> CheckOutput:
    """Validated outputs of one check. ``expected_shapes=None`` reads a trusted reference run."""
    files = _files(outputs)
    record = _read_json(files.get(check_file(check_id)), ProbeRecord)
    status = _read_json(files.get(status_file(check_id)), StatusRecord)
    if status is not None and (record is None or status.status == "timeout"):
        return CheckOutput(outcome=status.status, duration_ms=status.duration_ms, note=status.reason or "",
                           signal=status.signal, exit_code=status.exit_code)
    if record is None or record.check != check_id:
        return CheckOutput(outcome="missing")
    if record.status != "ok":
        return CheckOutput(outcome=record.status, error=record.error, duration_ms=record.duration_ms)
    arrays: dict[str, np.ndarray] = {}
    rejected: dict[str, str] = {}
    trusted = expected_shapes is None
    wanted = {n: None for n in record.arrays} if expected_shapes is None else expected_shapes
    for name, shape in wanted.items():
        if name not in record.arrays:
            continue
        if not _NAME.match(name):
            if trusted:
                raise HarnessProtocolError(
                    f"check {check_id!r}: the reference run's output {name!r} is not a valid output name (letters, "
                    "digits and _, at most 64 characters), so no student's output could be compared with it: "
                    "rename it in the unit's probes")
            continue
        try:
            arrays[name] = read_npy(files.get(f"{check_id}/{name}.npy"), shape)
        except ValueError as e:
            if trusted:
                raise HarnessProtocolError(f"check {check_id!r}: the reference run's output {name!r} cannot be "
                                           f"read ({e}): fix the unit's probes or reference") from None
            rejected[name] = str(e)
    return CheckOutput(outcome="ok", facts=record.facts, arrays=arrays, rejected=rejected,
                       duration_ms=record.duration_ms)


def read_npy(source: bytes | Path | None, shape: tuple[int, ...] | None) -> np.ndarray:
    """A float64 ndarray from a ``.npy`` file's bytes, refusing anything but plain finite numbers."""
    if isinstance(source, Path):
        source = None if source.is_symlink() or not source.is_file() else source.read_bytes()
    if source is None:
        raise ValueError("no array file was written")
    size = len(source)
    if size > MAX_ARRAY_BYTES:
        raise ValueError(f"array file is too large ({size} bytes)")
    with io.BytesIO(source) as f:
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


def _read_json(data: bytes | None, model: type[_R]) -> _R | None:
    try:
        if data is None or len(data) > MAX_JSON_BYTES:
            return None
        return model.model_validate(map_strings(json.loads(data), _shown))
    except (ValueError, RecursionError, ValidationError):
        return None


def _shown(text: str) -> str:
    """``text`` made safe to store and print. Escapes lengthen a string: it is cut back to its
    length (at least the smallest length cap of the schema, 80), so that a string within its cap
    stays within it."""
    return shown(text)[: max(len(text), 80)]
