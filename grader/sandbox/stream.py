"""The framed result stream a sandbox sends the host, parsed as untrusted input.

Records: ``T`` >I json (the layer check, first and only from the local supervisor), ``I`` (imported),
``F`` >H name >I size data (one output file), ``H`` (the visible phase's files are all above:
``frozen``), ``E`` (the end). Every length is capped, names are whitelisted, and anything malformed
marks the stream broken (its files are then never written; the frozen ones stay: they were whole
before the hidden checks' inputs existed, so nothing after them may change what they say).
"""

from __future__ import annotations

import json
import re
import struct
from typing import Any

MAX_OUTPUT_FILE = 32 * 1024 * 1024
MAX_OUTPUT_FILES = 4096
MAX_NAME = 128
MAX_LAYER_CHECK = 64 * 1024
_COMPONENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]{0,127}\Z")


class OutputStream:
    """Incremental parser of the bootstrap's stdout: ``I``, then ``F`` records, then ``E``.

    Untrusted input: every length is capped, names are whitelisted, and anything malformed marks
    the stream broken (its files are then never written).
    """

    def __init__(self, max_total: int) -> None:
        self.buf = bytearray()
        self.max_total = max_total
        self.total = 0
        self.files: dict[str, bytes] = {}
        self.imported = self.ended = False
        self.frozen: dict[str, bytes] | None = None  # the files sent before ``H``
        self.broken: str | None = None
        self.layer_check: dict[str, Any] | None = None
        self.started = False  # a record was read: a layer check can no longer come (feeds start anywhere)

    def feed(self, data: bytes) -> None:
        """Consume more stdout bytes; linear in their length whatever their content."""
        if self.ended or self.broken:
            return
        self.buf += data
        pos = 0
        while pos < len(self.buf) and not (self.ended or self.broken):
            kind = self.buf[pos]
            if kind == 0x49:  # I
                self.imported = True
                pos += 1
            elif kind == 0x45:  # E
                self.ended = True
                pos = len(self.buf)
            elif kind == 0x48 and self.frozen is None:  # H
                self.frozen = dict(self.files)
                pos += 1
            elif kind == 0x46:  # F
                used = self._file(pos)
                if used == 0:
                    break
                pos += used
            elif kind == 0x54 and not self.started:  # T: only as the stream's very first record
                used = self._layer_check()
                if used == 0:
                    break
                pos += used
            else:
                self._fail(f"unexpected byte {kind:#04x}")
            self.started = self.started or pos > 0
        if self.broken:
            return
        del self.buf[:pos]
        if len(self.buf) > MAX_OUTPUT_FILE + 2 * MAX_NAME + 8:
            self._fail("a record is larger than allowed")

    def _file(self, pos: int) -> int:
        """Bytes used by a complete ``F`` record at ``pos``, 0 when it is not complete yet."""
        buf = self.buf
        if len(buf) - pos < 3:
            return 0
        name_len: int = struct.unpack_from(">H", buf, pos + 1)[0]
        if not 0 < name_len <= 2 * MAX_NAME + 1:
            self._fail("bad name length")
            return 0
        start = pos + 3 + name_len + 4
        if len(buf) < start:
            return 0
        size: int = struct.unpack_from(">I", buf, start - 4)[0]
        if size > MAX_OUTPUT_FILE or self.total + size > self.max_total or len(self.files) >= MAX_OUTPUT_FILES:
            self._fail("output over the size or count cap")
            return 0
        if len(buf) < start + size:
            return 0
        try:
            name = bytes(buf[pos + 3:start - 4]).decode("ascii")
        except UnicodeDecodeError:
            name = ""
        if not valid_output_name(name) or name in self.files:
            self._fail(f"bad or repeated file name {name[:80]!r}")
            return 0
        self.files[name] = bytes(buf[start:start + size])
        self.total += size
        return start + size - pos

    def _layer_check(self) -> int:
        """Bytes used by a complete ``T`` record at the start, 0 when it is not complete yet."""
        if len(self.buf) < 5:
            return 0
        size: int = struct.unpack_from(">I", self.buf, 1)[0]
        if size > MAX_LAYER_CHECK:
            self._fail("layer check record too large")
            return 0
        if len(self.buf) < 5 + size:
            return 0
        try:
            report = json.loads(bytes(self.buf[5:5 + size]))
        except ValueError:
            report = None
        if not isinstance(report, dict):
            self._fail("malformed layer check record")
            return 0
        self.layer_check = report
        return 5 + size

    def _fail(self, why: str) -> None:
        self.broken = why
        self.files.clear()
        del self.buf[:]


def valid_output_name(name: str) -> bool:
    """``<file>`` or ``<check>/<file>``: whitelisted characters, no leading dot, nothing else."""
    parts = name.split("/")
    return 1 <= len(parts) <= 2 and all(_COMPONENT.match(p) for p in parts)
