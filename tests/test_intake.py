"""Intake: load and extract run in a child bounded in time and memory; whatever happens there costs
only that file, with a one-line reason."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from grader.errors import GraderError, SubmissionError
from grader.extract import extract
from grader.intake import read_submission
from grader.load import LoadLimits, load_submission

from .conftest import SUBMISSIONS, write_notebook

TARGETS = ("Embedding", "PositionalEncoding", "create_sinusoidal_embeddings", "EmbeddingLayer")
FAST = LoadLimits(max_seconds=1, max_wall_seconds=30, max_memory_mb=64)


@pytest.mark.parametrize("name", ["correct_tinytorch.ipynb", "correct_source.py"])
def test_reads_the_same_as_in_process(name: str) -> None:
    intake = read_submission(SUBMISSIONS / name, TARGETS)
    submission = load_submission(SUBMISSIONS / name)
    assert intake.submission == submission
    assert intake.module == extract(submission, TARGETS)


def test_refusals_come_back_as_one_line_submission_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{oops")
    with pytest.raises(SubmissionError, match=r"^bad.ipynb: not valid JSON") as info:
        read_submission(bad, TARGETS)
    assert "\n" not in str(info.value)


def _patch_reader(monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """Make the child's reader misbehave (the child is forked, so it inherits the patch)."""

    def misbehave(*args: object, **kwargs: object) -> None:
        if action == "hang":
            while True:
                pass
        if action == "sleep":
            time.sleep(60)
        if action == "memory":
            blocks = []
            while True:
                blocks.append(bytearray(16 * 1024 * 1024))
        if action == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
        raise KeyError("a bug in the grader")

    monkeypatch.setattr("grader.intake._read", misbehave)


@pytest.mark.parametrize(
    ("action", "error", "message"),
    [
        pytest.param("hang", SubmissionError, "took more than 1 s of CPU time", id="cpu-time"),
        pytest.param("sleep", SubmissionError, r"took more than 1\.5 s;", id="wall-clock"),
        pytest.param("memory", SubmissionError, "needs more than the 64 MB", id="memory"),
        pytest.param("segfault", SubmissionError, r"crashed the parser \(signal 11\)", id="crash"),
        pytest.param("bug", GraderError, "internal grader error while reading it, please report it: KeyError",
                     id="grader-bug"),
    ],
)
def test_a_reader_that_runs_away_or_dies_costs_only_that_file(
        monkeypatch: pytest.MonkeyPatch, action: str, error: type[Exception], message: str) -> None:
    _patch_reader(monkeypatch, action)
    limits = LoadLimits(max_seconds=1, max_wall_seconds=1.5) if action == "sleep" else FAST
    started = time.monotonic()
    with pytest.raises(error, match=message) as info:
        read_submission(SUBMISSIONS / "correct_tinytorch.ipynb", TARGETS, limits)
    assert time.monotonic() - started < 20
    assert info.type is error and "\n" not in str(info.value)
    monkeypatch.undo()
    assert read_submission(SUBMISSIONS / "correct_tinytorch.ipynb", TARGETS).module.chunks  # the next one is fine


def children() -> set[str]:
    """Pids of this process's children, zombies included (Linux)."""
    return {pid for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()}


def test_children_are_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    before = children()
    nb = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    for _ in range(3):
        read_submission(nb, TARGETS)
    _patch_reader(monkeypatch, "hang")
    with pytest.raises(SubmissionError):
        read_submission(nb, TARGETS, LoadLimits(max_seconds=1, max_wall_seconds=0.5))
    assert children() == before  # none left behind, running or zombie


def test_reads_from_several_threads_at_once(tmp_path: Path) -> None:
    """Batch grading reads in several threads: each child gets its own pipe and its own result."""
    paths = [write_notebook(tmp_path / f"n{i}.ipynb", [f"class Embedding:\n    n = {i}\n"]) for i in range(12)]
    got: dict[int, str] = {}

    def read(i: int) -> None:
        got[i] = read_submission(paths[i], TARGETS).module.chunks[0].source

    threads = [threading.Thread(target=read, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert got == {i: f"class Embedding:\n    n = {i}" for i in range(12)}
