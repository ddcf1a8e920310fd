"""Load stage: what is accepted, and every way a file is refused with a one-line error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.errors import SubmissionError
from grader.load import LoadLimits, load_submission

from .conftest import SUBMISSIONS, write_notebook


def test_reads_code_cells_and_ignores_outputs_and_metadata(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "a.ipynb", [("markdown", "# hi"), "x = 1", ("raw", "raw!"), "y = 2"],
                        metadata={"kernelspec": {"name": "evil", "display_name": "evil", "language": "sh"}})
    sub = load_submission(nb)
    assert [(c.index, c.source) for c in sub.cells] == [(2, "x = 1"), (4, "y = 2")]
    assert sub.format == "ipynb" and len(sub.sha256) == 64


def test_reads_jupytext_percent_source() -> None:
    sub = load_submission(SUBMISSIONS / "correct_source.py")
    assert sub.format == "py"
    assert any("class Embedding" in c.source for c in sub.cells)


def test_upgrades_nbformat_v3(tmp_path: Path) -> None:
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {},
          "worksheets": [{"cells": [{"cell_type": "code", "input": "z = 3", "language": "python",
                                     "outputs": [], "metadata": {}}], "metadata": {}}]}
    path = tmp_path / "old.ipynb"
    path.write_text(json.dumps(v3))
    sub = load_submission(path)
    assert [c.source for c in sub.cells] == ["z = 3"]
    assert sub.notes == ("upgraded from nbformat v3",)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param(b"{not json", "not valid JSON", id="invalid-json"),
        pytest.param(b'{"cells": [], "nbformat": 4, "nbformat_minor": 5, "metadata": {}}\x00', "NUL bytes", id="nul-bytes"),
        pytest.param(b"\xff\xfe\x00garbage", "NUL bytes", id="binary"),
        pytest.param(json.dumps({"cells": [{"cell_type": "code", "source": 5}], "nbformat": 4,
                                 "nbformat_minor": 5, "metadata": {}}).encode(), "not a valid notebook", id="schema-invalid"),
        pytest.param(json.dumps({"cells": [{"cell_type": "weird", "source": "", "metadata": {}}], "nbformat": 4,
                                 "nbformat_minor": 5, "metadata": {}}).encode(), "not a valid notebook", id="odd-cell-type"),
        pytest.param(b"[1, 2, 3]", "not a Jupyter notebook", id="json-list"),
        pytest.param(json.dumps({"cells": [], "nbformat": 99, "metadata": {}}).encode(), "unsupported nbformat",
                     id="future-version"),
    ],
)
def test_refuses_malformed_notebooks(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.ipynb"
    path.write_bytes(content)
    with pytest.raises(SubmissionError, match=message) as info:
        load_submission(path)
    assert "\n" not in str(info.value)


def test_refuses_files_over_the_size_limit(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "big.ipynb", ["x = '" + "a" * 5000 + "'"])
    with pytest.raises(SubmissionError, match="larger than the 4 KiB limit"):
        load_submission(nb, LoadLimits(max_bytes=4096))


def test_refuses_too_many_cells(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "many.ipynb", ["pass"] * 2001)
    with pytest.raises(SubmissionError, match="2000-cell limit"):
        load_submission(nb)


@pytest.mark.parametrize("name", ["missing.ipynb", "dir.ipynb", "link.ipynb", "notes.txt"])
def test_refuses_what_is_not_a_notebook_file(tmp_path: Path, name: str) -> None:
    (tmp_path / "dir.ipynb").mkdir()
    (tmp_path / "link.ipynb").symlink_to(SUBMISSIONS / "correct_tinytorch.ipynb")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SubmissionError):
        load_submission(tmp_path / name)
