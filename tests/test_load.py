"""Load stage: what is accepted, and every way a file is refused with a one-line error."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grader.errors import SubmissionError
from grader.extract import extract
from grader.intake import read_submission
from grader.load import LoadLimits, _without_header_yaml, load_submission

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


@pytest.mark.parametrize("marker", ["# %%", "#%% [markdown]", "  # %% title", "# <codecell>", "# In[ ]:"])
def test_a_jupytext_source_over_the_cell_cap_is_refused_before_jupytext_reads_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, marker: str) -> None:
    import jupytext

    def not_called(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("jupytext parsed a source over the cell cap")

    source = tmp_path / "many.py"
    source.write_text(f"{marker}\nx = 1\n" * 2001)
    monkeypatch.setattr(jupytext, "reads", not_called)
    with pytest.raises(SubmissionError, match="2000-cell limit"):
        load_submission(source)


def test_a_jupytext_source_at_the_cell_cap_is_read(tmp_path: Path) -> None:
    source = tmp_path / "full.py"
    source.write_text("x = 0\n" + "# %%\nx = 1\n# %%not a marker\n" * 1999)
    assert len(load_submission(source).cells) == 2000


@pytest.mark.parametrize("name", ["missing.ipynb", "dir.ipynb", "link.ipynb", "notes.txt"])
def test_refuses_what_is_not_a_notebook_file(tmp_path: Path, name: str) -> None:
    (tmp_path / "dir.ipynb").mkdir()
    (tmp_path / "link.ipynb").symlink_to(SUBMISSIONS / "correct_tinytorch.ipynb")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(SubmissionError):
        load_submission(tmp_path / name)


def v3_notebook(sources: list[str]) -> str:
    cells = [{"cell_type": "code", "input": s, "outputs": []} for s in sources]
    nb = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"cells": cells, "metadata": {}}]}
    return json.dumps(nb, separators=(",", ":"))


def test_the_cell_cap_holds_before_an_old_notebook_is_upgraded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def upgrade(*args: object) -> None:
        raise AssertionError("upgraded before the cell cap was checked")

    monkeypatch.setattr("grader.load._upgrade", upgrade)
    path = tmp_path / "old.ipynb"
    path.write_text(v3_notebook(["pass"] * 60_000))  # upgrading 60k cells costs seconds of CPU
    with pytest.raises(SubmissionError, match="2000-cell limit"):
        load_submission(path)


def yaml_alias_bomb(depth: int) -> str:
    """A jupytext header whose ``jupyter:`` YAML expands to 9**depth nodes if aliases are followed."""
    lines = ["# ---", "# jupyter:", "#   a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"#   a{d}: &a{d} [{', '.join([f'*a{d - 1}'] * 9)}]" for d in range(1, depth + 1)]
    return "\n".join([*lines, "# ---", "", "# %%", "x = 1", "", "# %% [markdown]", "# notes", "", "# %%", "y = 2", ""])


def test_a_yaml_alias_bomb_in_a_jupytext_header_is_never_expanded(tmp_path: Path) -> None:
    path = tmp_path / "bomb.py"
    path.write_text(yaml_alias_bomb(9), encoding="utf-8")  # 387 million nodes if expanded
    # Read in a bounded child, so that a regression fails this test instead of the machine.
    intake = read_submission(path, ("x",), LoadLimits(max_seconds=20, max_memory_mb=256))
    assert [(c.index, c.source) for c in intake.submission.cells] == [(1, "x = 1"), (3, "y = 2")]


@pytest.mark.parametrize(
    "header",
    [
        pytest.param("", id="plain"),
        pytest.param("#!/usr/bin/env python\n", id="shebang"),
        pytest.param("# -*- coding: utf-8 -*-\n", id="coding-line"),
        pytest.param("#\n", id="blank-comment-first"),
    ],
)
def test_jupytext_sources_read_the_same_without_their_header_yaml(header: str) -> None:
    import jupytext

    text = header + (SUBMISSIONS / "correct_source.py").read_text(encoding="utf-8").replace(
        "# ---\n", "# ---\n# title: root-level metadata\n", 1)
    expected = [(c.cell_type, c.source) for c in jupytext.reads(text, fmt="py:percent").cells]
    got = [(c.cell_type, c.source) for c in jupytext.reads(_without_header_yaml(text), fmt="py:percent").cells]
    assert got == expected
    assert "format_name" not in _without_header_yaml(text)


def test_text_no_encoder_accepts_is_made_visible_with_a_note(tmp_path: Path) -> None:
    # A lone surrogate is valid JSON ("\ud800") but neither UTF-8 nor storable: it used to stop a
    # whole class batch when the report was saved.
    nb = write_notebook(tmp_path / "s.ipynb", ["!echo \ud800 hi", "x = '\udcff'", "y = 1"])
    sub = load_submission(nb)
    assert [c.source for c in sub.cells] == ["!echo \\ud800 hi", "x = '\\xff'", "y = 1"]
    assert sub.notes == ("cell 1, 2: lone surrogate characters (not valid text) were replaced by visible escapes",)
    module = extract(sub, ("y",))
    assert "\\ud800" in module.dropped[0].detail
    json.loads(sub.model_dump_json()), json.loads(module.model_dump_json())


def test_file_names_are_made_safe_to_print_and_store(tmp_path: Path) -> None:
    name = os.fsdecode(b"evil\xff\x1b[2J.ipynb")  # an invalid UTF-8 byte and a terminal escape
    nb = write_notebook(tmp_path / name, ["x = 1"])
    sub = load_submission(nb)
    assert sub.file_name == "evil\\xff\\x1b[2J.ipynb"
    json.loads(sub.model_dump_json())
