"""The result channel: only plain, finite, correctly shaped numbers and schema-valid JSON get in."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from grader.channel import read_check, read_import, read_npy
from grader.errors import HarnessProtocolError
from grader.harness.records import SCHEMA, stamped


def save(path: Path, value: object, **kw: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        np.lib.format.write_array(f, value, allow_pickle=True, **kw)  # type: ignore[arg-type]
    return path


def test_reads_a_plain_array_as_float64(tmp_path: Path) -> None:
    out = read_npy(save(tmp_path / "a.npy", np.arange(6, dtype=np.int32).reshape(2, 3)), (2, 3))
    assert type(out) is np.ndarray and out.dtype == np.float64 and out.tolist() == [[0, 1, 2], [3, 4, 5]]


@pytest.mark.parametrize(
    ("value", "shape", "reason"),
    [
        pytest.param(np.array([1, None], dtype=object), (2,), "not a plain number", id="object-dtype"),
        pytest.param(np.array(["a", "b"]), (2,), "not a plain number", id="strings"),
        pytest.param(np.zeros((3, 2)), (2, 3), "differs from the expected", id="wrong-shape"),
        pytest.param(np.zeros((0, 2)), (0, 2), "empty", id="empty"),
        pytest.param(np.array([1.0, np.nan]), (2,), "NaN", id="nan"),
        pytest.param(np.array([np.inf]), (1,), "NaN or infinite", id="inf"),
        pytest.param(np.zeros(2, dtype=[("a", "f8")]), (2,), "not a plain number", id="structured"),
    ],
)
def test_refuses_arrays_that_are_not_plain_finite_numbers(tmp_path: Path, value: np.ndarray, shape: tuple[int, ...],
                                                         reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        read_npy(save(tmp_path / "a.npy", value), shape)


def test_refuses_pickles_symlinks_and_truncated_files(tmp_path: Path) -> None:
    (tmp_path / "p.npy").write_bytes(pickle.dumps([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"not a valid \.npy"):
        read_npy(tmp_path / "p.npy", (2,))
    good = save(tmp_path / "g.npy", np.ones(4))
    (tmp_path / "link.npy").symlink_to(good)
    with pytest.raises(ValueError, match="no array file"):
        read_npy(tmp_path / "link.npy", (4,))
    (tmp_path / "t.npy").write_bytes(good.read_bytes()[:-8])
    with pytest.raises(ValueError, match="truncated"):
        read_npy(tmp_path / "t.npy", (4,))


def test_forged_or_malformed_records_count_as_missing(tmp_path: Path) -> None:
    (tmp_path / "c1.json").write_text(json.dumps({"check": "c1", "status": "passed", "score": 100}))
    (tmp_path / "c2.json").write_text("{" * 100_000)
    (tmp_path / "c3.json").write_text(json.dumps({"check": "other", "status": "ok"}))
    for check in ("c1", "c2", "c3", "c4"):
        assert read_check(tmp_path, check, {}).outcome == "missing"
    assert read_import(tmp_path) is None


@pytest.mark.parametrize("field", ['"duration_ms": NaN', '"duration_ms": 1e999', '"duration_ms": -1',
                                   '"signal": 100000', '"exit_code": -5'])
def test_numbers_a_report_could_not_carry_count_as_missing(tmp_path: Path, field: str) -> None:
    """NaN and infinity have no JSON form: a report holding one would be stored as null and no longer
    load (nor would the batch's feedback and exports for anyone). Such a record is refused whole."""
    (tmp_path / "c.json").write_text(f'{{"schema": {SCHEMA}, "check": "c", "status": "error", {field}}}')
    (tmp_path / "d.status.json").write_text(f'{{"schema": {SCHEMA}, "check": "d", "status": "crashed", {field}}}')
    assert read_check(tmp_path, "c", {}).outcome == read_check(tmp_path, "d", {}).outcome == "missing"


def test_only_arrays_the_reference_produced_are_read(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(stamped({"check": "c", "status": "ok", "arrays": ["a", "extra"]})))
    save(tmp_path / "c" / "a.npy", np.ones(2))
    save(tmp_path / "c" / "extra.npy", np.ones(2))
    out = read_check(tmp_path, "c", {"a": (2,)})
    assert list(out.arrays) == ["a"]


def test_a_trusted_output_the_host_cannot_read_is_an_error_for_the_staff_not_a_silent_drop(tmp_path: Path) -> None:
    """An output name outside [A-Za-z0-9_]{1,64} (``q_proj.weight``, say) was once dropped from the
    reference's outputs without a word, so the student's matching output was never compared."""
    (tmp_path / "c.json").write_text(json.dumps(stamped({"check": "c", "status": "ok", "arrays": ["a", "w.grad"]})))
    save(tmp_path / "c" / "a.npy", np.ones(2))
    save(tmp_path / "c" / "w.grad.npy", np.ones(2))
    with pytest.raises(HarnessProtocolError, match=r"check 'c': the reference run's output 'w\.grad' is not a valid"):
        read_check(tmp_path, "c", None)
    assert list(read_check(tmp_path, "c", {"a": (2,), "w.grad": (2,)}).arrays) == ["a"]  # a student's: dropped
    (tmp_path / "c.json").write_text(json.dumps(stamped({"check": "c", "status": "ok", "arrays": ["a", "b"]})))
    save(tmp_path / "c" / "b.npy", np.array([1.0, np.nan]))
    with pytest.raises(HarnessProtocolError, match=r"output 'b' cannot be read .*NaN"):
        read_check(tmp_path, "c", None)


def test_facts_must_be_plain_json_scalars(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(stamped({"check": "c", "status": "ok", "facts": {"x": {"nested": 1}}})))
    assert read_check(tmp_path, "c", {}).outcome == "missing"


def npy(path: Path, header: str, data: bytes = b"\0" * 16, version: int = 1) -> Path:
    """A hand-made .npy file: magic, version, header length, header, data."""
    raw = header.encode("latin-1")
    width = 2 if version == 1 else 4
    path.write_bytes(b"\x93NUMPY" + bytes([version, 0]) + len(raw).to_bytes(width, "little") + raw + data)
    return path


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        pytest.param("{'descr': (), 'fortran_order': False, 'shape': (2,), }", "not a plain number", id="descr-empty-tuple"),
        pytest.param("{'descr': [('a', '<f8')], 'fortran_order': False, 'shape': (2,), }", "not a plain number",
                     id="descr-structured-list"),
        pytest.param("{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", "not a plain number", id="descr-object"),
        pytest.param("{'descr': '<c16', 'fortran_order': False, 'shape': (1,), }", "not a plain number", id="complex"),
        pytest.param("{'descr': '<f8', 'fortran_order': 'yes', 'shape': (2,), }", "bad fortran_order", id="fortran-str"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': (-2,), }", "bad fortran_order or shape",
                     id="negative-shape"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': (2.0,), }", "bad fortran_order or shape",
                     id="float-shape"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), 'extra': 1}", "descr, fortran_order",
                     id="extra-key"),
        pytest.param("['descr', 'shape']", "descr, fortran_order", id="not-a-dict"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': " + "(" * 300 + ")" * 300 + "}",
                     "unreadable header", id="deep-nesting"),
        pytest.param("__import__('os').system('true')", "unreadable header", id="code"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }" + " " * 5000, "header of",
                     id="huge-header"),
        pytest.param("{'descr': '<f8', 'fortran_order': False, 'shape': (65536, 65536, 65536), }", "too large",
                     id="huge-shape"),
    ],
)
def test_crafted_npy_headers_are_refused_with_a_reason(tmp_path: Path, header: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        read_npy(npy(tmp_path / "a.npy", header), None)


def test_npy_versions_2_and_3_are_read(tmp_path: Path) -> None:
    header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }"
    data = np.array([1.5, 2.5]).tobytes()
    for version in (2, 3):
        assert read_npy(npy(tmp_path / f"v{version}.npy", header, data, version), (2,)).tolist() == [1.5, 2.5]
    with pytest.raises(ValueError, match=r"no \.npy magic and version"):
        read_npy(npy(tmp_path / "v9.npy", header, data, 9), (2,))


def test_a_crafted_array_costs_only_its_check(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text(json.dumps(stamped({"check": "c", "status": "ok", "arrays": ["a", "b"]})))
    (tmp_path / "c").mkdir()
    npy(tmp_path / "c" / "a.npy", "{'descr': (), 'fortran_order': False, 'shape': (2,), }")
    save(tmp_path / "c" / "b.npy", np.ones(2))
    out = read_check(tmp_path, "c", {"a": (2,), "b": (2,)})
    assert out.outcome == "ok" and list(out.arrays) == ["b"] and "not a plain number" in out.rejected["a"]


def test_strings_from_the_sandbox_are_made_safe_to_store_and_print(tmp_path: Path) -> None:
    message = "boom \ud800 \x1b]0;pwned\x07 \udcff\nsecond line" + "." * 900
    (tmp_path / "c.json").write_text(json.dumps(stamped({
        "check": "c", "status": "error", "error": {"type": "ValueError", "message": message}})))
    out = read_check(tmp_path, "c", {})
    assert out.outcome == "error" and out.error is not None
    # escaped, and cut back to the length it had: within the schema's 1000-character cap
    assert out.error.message == ("boom \\ud800 \\x1b]0;pwned\\x07 \\xff\nsecond line" + "." * 900)[: len(message)]
    out.model_dump_json()  # would raise on a lone surrogate
    (tmp_path / "d.json").write_text(json.dumps(stamped({"check": "d", "status": "ok", "facts": {"k\ud800": "v\x1b[2J"}})))
    assert read_check(tmp_path, "d", {}).facts == {"k\\ud800": "v\\x1b[2J"}


def test_a_record_of_another_schema_is_refused(tmp_path: Path) -> None:
    record = {"check": "c", "status": "ok", "facts": {"x": 1}}
    (tmp_path / "c.json").write_text(json.dumps({**record, "schema": SCHEMA + 1}))
    assert read_check(tmp_path, "c", None).outcome == "missing"
    (tmp_path / "c.json").write_text(json.dumps(record))  # no schema at all
    assert read_check(tmp_path, "c", None).outcome == "missing"
    (tmp_path / "c.json").write_text(json.dumps(stamped(record)))
    assert read_check(tmp_path, "c", None).facts == {"x": 1}
