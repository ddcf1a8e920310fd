"""The local sandbox's result stream, fed hostile bytes: whatever reaches the host's parser, it
never writes a file outside the rules, never accepts a second or late layer check, and never
buffers more than one capped record."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from grader.sandbox.stream import MAX_LAYER_CHECK, MAX_OUTPUT_FILE, OutputStream

CAP = 4 * 1024 * 1024


def layer_check(report: object) -> bytes:
    body = json.dumps(report).encode()
    return b"T" + struct.pack(">I", len(body)) + body


def file_record(name: str | bytes, data: bytes, size: int | None = None) -> bytes:
    raw = name.encode() if isinstance(name, str) else name
    return b"F" + struct.pack(">H", len(raw)) + raw + struct.pack(">I", len(data) if size is None else size) + data


GOOD_TEST = layer_check({"mode": "namespaces", "verified": ["non-root-uid"], "ok": True})


def feed(*chunks: bytes, bytewise: bool = False) -> OutputStream:
    stream = OutputStream(max_total=CAP)
    for chunk in chunks:
        if bytewise:
            for i in range(len(chunk)):
                stream.feed(chunk[i:i + 1])
        else:
            stream.feed(chunk)
    return stream


def test_a_well_formed_stream_split_anywhere_is_read_whole() -> None:
    data = GOOD_TEST + b"I" + file_record("import.json", b"{}") + file_record("emb_shape/out.npy", b"\x93NUMPY") + b"E"
    stream = feed(data, bytewise=True)
    assert stream.ended and not stream.broken and stream.imported
    assert stream.layer_check == {"mode": "namespaces", "verified": ["non-root-uid"], "ok": True}
    assert stream.files == {"import.json": b"{}", "emb_shape/out.npy": b"\x93NUMPY"}


@pytest.mark.parametrize("forged", [
    pytest.param(GOOD_TEST + GOOD_TEST, id="second-layer_check"),
    pytest.param(b"I" + GOOD_TEST, id="layer_check-after-import"),
    pytest.param(GOOD_TEST + file_record("import.json", b"{}") + GOOD_TEST, id="layer_check-after-a-file"),
    pytest.param(layer_check(["not", "a", "dict"]), id="layer_check-not-an-object"),
    pytest.param(b"T" + struct.pack(">I", 3) + b"{x}", id="layer_check-not-json"),
    pytest.param(b"T" + struct.pack(">I", MAX_LAYER_CHECK + 1), id="layer_check-too-large"),
    pytest.param(b"Z", id="unknown-record"),
])
def test_forged_layer_check_or_unknown_records_break_the_stream(forged: bytes) -> None:
    stream = feed(forged + file_record("import.json", b"{}") + b"E")
    assert stream.broken and not stream.files
    assert stream.layer_check in (None, {"mode": "namespaces", "verified": ["non-root-uid"], "ok": True})


@pytest.mark.parametrize("first", [b"H", b"HH", b"I"], ids=["freeze", "two-freezes", "import"])
def test_a_layer_check_counts_only_as_the_very_first_record_whatever_the_pieces(first: bytes) -> None:
    # the first piece alone: the parser's buffer starts afresh with the next one
    stream = feed(first, GOOD_TEST + file_record("import.json", b"{}") + b"E")
    assert stream.broken and stream.layer_check is None and not stream.files


@pytest.mark.parametrize("name", ["../escape.json", "/etc/passwd", "a/b/c.json", ".hidden", "emb/..", "", "x" * 200,
                                  "bad\nname", "emb_shape/", "caf\u00e9.json"])
def test_names_outside_the_whitelist_break_the_stream(name: str) -> None:
    stream = feed(GOOD_TEST + file_record(name.encode("utf-8"), b"data") + b"E")
    assert stream.broken and not stream.files


def test_repeated_name_breaks_the_stream() -> None:
    stream = feed(GOOD_TEST + file_record("import.json", b"1") + file_record("import.json", b"2") + b"E")
    assert stream.broken and not stream.files


def test_huge_records_are_refused_before_they_are_buffered() -> None:
    """A header announcing 4 GiB, or more than the job's total, breaks the stream at once: the
    parser never waits to buffer it."""
    for size in (0xFFFFFFFF, MAX_OUTPUT_FILE + 1, CAP + 1):
        stream = feed(GOOD_TEST + file_record("import.json", b"", size=size))
        assert stream.broken, size
        assert len(stream.buf) == 0
    stream = feed(GOOD_TEST + b"F" + struct.pack(">H", 0xFFFF))
    assert stream.broken


def test_many_small_records_over_the_total_cap_break_the_stream() -> None:
    chunk = b"x" * (1024 * 1024)
    records = b"".join(file_record(f"f{i}.npy", chunk) for i in range(5))
    stream = feed(GOOD_TEST + records + b"E")
    assert stream.broken and not stream.files


def test_bytes_after_the_end_are_ignored() -> None:
    stream = feed(GOOD_TEST + file_record("import.json", b"{}") + b"E" + file_record("late.json", b"forged"))
    assert stream.ended and set(stream.files) == {"import.json"}


def test_the_job_crosses_in_two_parts_and_only_the_second_holds_secrets() -> None:
    """The part the supervisor reads before it forks the harness has no hidden check and no seed
    (the harness's memory is a copy of the supervisor's); a visible part with either is refused."""
    from grader.harness import wire

    checks: list[dict[str, Any]] = [
        {"id": "shown", "visible": True, "inputs": {"x": 1}},
        {"id": "secret", "visible": False, "inputs": {"x": 2}},
        {"id": "unmarked", "inputs": {"x": 3}},
    ]
    job = {"module": "m", "seed": 1234567, "numpy_seed": 5, "checks": checks}
    message = wire.pack(job, b"{}", 7.0)
    sizes = wire.HEADER.unpack_from(message)
    first = message[wire.HEADER.size:wire.HEADER.size + sizes[0]]
    assert b"secret" not in first and b"unmarked" not in first and b"1234567" not in first
    assert [c["id"] for c in wire.visible_part(first)["checks"]] == ["shown"]
    rest = json.loads(message[-sizes[2]:])
    assert [c["id"] for c in rest] == ["secret", "unmarked"]
    for forged in ({**job, "checks": checks[:1]}, {"checks": checks[1:]}, {"checks": checks[2:]}):
        with pytest.raises(ValueError):
            wire.visible_part(json.dumps(forged).encode())


@pytest.mark.parametrize("after", [b"", file_record("late.json", b"{}")[:-1], b"X"], ids=["cut", "cut-mid-record", "broken"])
def test_the_visible_phase_stays_frozen_whatever_follows(after: bytes) -> None:
    """What the sandbox sent before ``H`` (the visible checks, before the hidden inputs existed) is
    kept even when the stream is cut or broken afterwards; nothing sent after ``H`` joins it."""
    before = GOOD_TEST + file_record("import.json", b"{}") + file_record("shown.json", b"[1]") + b"H"
    stream = feed(before + file_record("secret.json", b"[2]") + after)
    assert stream.frozen == {"import.json": b"{}", "shown.json": b"[1]"}
    assert not stream.ended
    assert (stream.broken is not None) == (after == b"X")


def test_a_second_phase_mark_breaks_the_stream_but_not_the_frozen_files() -> None:
    stream = feed(GOOD_TEST + file_record("a.json", b"1") + b"H" + file_record("b.json", b"2") + b"H" + b"E")
    assert stream.frozen == {"a.json": b"1"} and stream.broken and not stream.files
