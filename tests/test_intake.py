"""Intake: load and extract run in a child bounded in time and memory; whatever happens there costs
only that file, with a one-line reason."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

from grader.errors import GraderError, SubmissionError
from grader.extract import extract
from grader.intake import load_bounded, read_submission, shutdown
from grader.load import LoadLimits, load_submission

from .conftest import SUBMISSIONS, write_notebook

TARGETS = ("Embedding", "PositionalEncoding", "create_sinusoidal_embeddings", "EmbeddingLayer")
FAST = LoadLimits(max_seconds=1, max_wall_seconds=30, max_memory_mb=64)


@pytest.mark.parametrize("name", ["correct_tinytorch.ipynb", "correct_source.py"])
def test_reads_the_same_as_in_process(name: str) -> None:
    intake = read_submission(SUBMISSIONS / name, TARGETS)
    submission = load_submission(SUBMISSIONS / name)
    assert intake.submission == submission
    assert intake.code == extract(submission, TARGETS)


@pytest.mark.parametrize("name", ["correct_tinytorch.ipynb", "correct_source.py"])
def test_loads_alone_the_same_as_in_process(name: str) -> None:
    assert load_bounded(SUBMISSIONS / name) == load_submission(SUBMISSIONS / name)


def test_a_load_alone_is_bounded_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _patch_reader(monkeypatch, "hang")
    with pytest.raises(SubmissionError, match="CPU time"):
        load_bounded(SUBMISSIONS / "correct_source.py", FAST)
    shutdown()


def test_refusals_come_back_as_one_line_submission_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.ipynb"
    bad.write_text("{oops")
    with pytest.raises(SubmissionError, match=r"^bad.ipynb: not valid JSON") as info:
        read_submission(bad, TARGETS)
    assert "\n" not in str(info.value)


def _patch_reader(monkeypatch: pytest.MonkeyPatch, action: str) -> None:
    """Make the reader misbehave in a fresh worker (forked after the patch, so it inherits it)."""

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

    monkeypatch.setattr("grader.intake.load_submission", misbehave)
    shutdown()


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
    shutdown()  # the misbehaving worker may still be there (a bug is answered, the worker retires)
    assert read_submission(SUBMISSIONS / "correct_tinytorch.ipynb", TARGETS).code.chunks  # the next one is fine


def children() -> set[str]:
    """Pids of this process's children, zombies included (Linux)."""
    return {pid for task in Path("/proc/self/task").iterdir() for pid in (task / "children").read_text().split()}


def test_workers_are_reused_and_replaced_and_none_is_left_behind(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shutdown()
    before = children()
    nb = write_notebook(tmp_path / "a.ipynb", ["x = 1"])
    for _ in range(3):
        read_submission(nb, TARGETS)
    assert len(children() - before) == 1  # one warm worker serves them all
    _patch_reader(monkeypatch, "hang")
    with pytest.raises(SubmissionError):
        read_submission(nb, TARGETS, LoadLimits(max_seconds=1, max_wall_seconds=0.5))
    assert children() == before  # the worker that ran out of time was killed and reaped
    monkeypatch.undo()
    read_submission(nb, TARGETS)
    shutdown()
    assert children() == before  # none left behind, running or zombie


def test_reads_from_several_threads_at_once(tmp_path: Path) -> None:
    """Batch grading reads in several threads: each has its own worker, and starting one must not
    disturb the others (a new worker inherits its siblings' handles)."""
    paths = [write_notebook(tmp_path / f"n{i}.ipynb", [f"class Embedding:\n    n = {i}\n"]) for i in range(6)]
    rounds = threading.Barrier(6)
    got: dict[int, list[str]] = {i: [] for i in range(6)}

    def read(i: int) -> None:
        for _ in range(3):
            got[i].append(read_submission(paths[i], TARGETS).code.chunks[0].source)
            rounds.wait(timeout=60)

    threads = [threading.Thread(target=read, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert got == {i: [f"class Embedding:\n    n = {i}"] * 3 for i in range(6)}


def test_a_fork_elsewhere_in_the_process_leaves_the_workers_alone(tmp_path: Path) -> None:
    """A child forked to run Python code (subprocess's preexec_fn, as the local sandbox's namespace
    probe does) drops the other threads' workers there: it must not stop them here."""
    nb = write_notebook(tmp_path / "a.ipynb", ["class Embedding:\n    pass\n"])
    forked, results = threading.Event(), []

    def reader() -> None:
        results.append(read_submission(nb, TARGETS).code.kept)
        forked.wait(timeout=60)
        results.append(read_submission(nb, TARGETS).code.kept)

    thread = threading.Thread(target=reader)
    thread.start()
    while not results and thread.is_alive():
        time.sleep(0.01)
    subprocess.run(["/bin/true"], preexec_fn=lambda: None, check=True)
    forked.set()
    thread.join(timeout=60)
    assert results == [("Embedding",), ("Embedding",)]


def test_a_warm_worker_killed_from_outside_does_not_fail_the_next_file(tmp_path: Path) -> None:
    nb = write_notebook(tmp_path / "a.ipynb", ["class Embedding:\n    pass\n"])
    shutdown()
    before = children()
    read_submission(nb, TARGETS)
    (worker,) = children() - before
    os.kill(int(worker), signal.SIGKILL)  # the kernel's OOM killer, say, between two files
    assert read_submission(nb, TARGETS).code.kept == ("Embedding",)
