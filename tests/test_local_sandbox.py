"""The local backend's isolation as a user of the report sees it: which layers are verified, when
official grading refuses, the fallback mode for containers without namespaces, and that nothing
a run creates on the host outlives it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader import Grader
from grader.errors import SandboxUnavailable
from grader.sandbox import cgroup
from grader.sandbox.local import LocalSandbox, isolation_mode, required_layers, source_checkout
from grader.sandbox.stream import OutputStream
from grader.settings import reload as reload_settings

from .conftest import SUBMISSIONS, write_notebook

CORRECT = SUBMISSIONS / "correct_tinytorch.ipynb"
ROOT = os.geteuid() == 0
UIDS = range(1_990_000_000, 1_991_000_000)
# Every Embedding made leaves a detached sleeper behind (bounded: 30 s, a few per check).
LEAVER = """import os, time

class Embedding:
    def __init__(self, vocab_size, embed_dim):
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(30)
            os._exit(0)
        raise ValueError("left a process behind")
"""


def _job_processes(uids: range = UIDS) -> list[int]:
    """Live processes owned by one of ``uids`` (the root grader's per-job uids)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/status", "rb") as f:
                status = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        except (OSError, ValueError):
            continue
        if int(status[b"Uid"].split()[0]) in uids and not status[b"State"].strip().startswith(b"Z"):
            found.append(int(entry))
    return found


@pytest.fixture
def own_uids(monkeypatch: pytest.MonkeyPatch) -> range:
    """Job uids that only this test uses (other graders may run on the machine at the same time)."""
    offset = 500_000 + os.getpid() % 1000 * 100
    counter = iter(range(100))
    monkeypatch.setattr("grader.sandbox.local.random.randrange", lambda span: offset + next(counter))
    return range(UIDS.start + offset, UIDS.start + offset + 100)


@pytest.fixture
def own_cgroups(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Every cgroup directory the sandbox makes during the test."""
    made: list[Path] = []
    original = cgroup.JobCgroups._make

    def recording(self: cgroup.JobCgroups, controller: str | None, path: Path, settings: dict[str, str]) -> bool:
        made.append(path)
        return original(self, controller, path, settings)

    monkeypatch.setattr(cgroup.JobCgroups, "_make", recording)
    return made


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if not ROOT:
        pytest.skip("the fallback mode is for a root grader without namespaces")
    monkeypatch.setenv("GRADER_LOCAL_MODE", "fallback")
    reload_settings()
    yield


def test_the_report_lists_exactly_the_layers_this_run_verified() -> None:
    with Grader(backend="local") as g:
        report = g.grade(CORRECT)
    assert report.score == report.max_score
    layers = set(report.backend.isolation)
    mode = isolation_mode()
    assert {"non-root-uid", "no-capabilities", "seccomp-filter", "hidden-reference"} <= layers
    missing = [layer for layer in required_layers(mode) if layer not in layers]
    if missing:  # a machine without a layer says so, in the report itself
        assert any(", ".join(missing) in w for w in report.backend.warnings)
    else:
        assert not any("not in place" in w for w in report.backend.warnings)


def test_official_grading_on_this_machine_verifies_every_layer_or_refuses() -> None:
    sandbox = LocalSandbox(official=True)
    try:
        layers = sandbox.verify()
    except SandboxUnavailable as e:
        assert "could not be verified" in str(e) or "needs Linux namespaces or root" in str(e)
        assert "--backend docker" in str(e)
        return
    finally:
        sandbox.close()
    assert set(required_layers(sandbox.mode)) <= set(layers)
    if ROOT and sandbox.mode == "namespaces":  # CI runs as root: the full set must be there
        assert {"memory-cgroup", "pids-cgroup", "cpu-cgroup", "read-only-proc-sys", "minimal-dev"} <= set(layers)


def test_official_grading_refuses_without_namespaces_or_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_LOCAL_MODE", "none")
    reload_settings()
    with pytest.raises(SandboxUnavailable, match="--backend docker"):
        LocalSandbox(official=True).verify()


def test_practice_without_namespaces_still_grades_and_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_LOCAL_MODE", "none")
    reload_settings()
    with Grader(backend="local") as g:
        report = g.grade(CORRECT)
    assert report.backend.label == "practice"
    assert "read-only-filesystem" not in report.backend.isolation
    assert any("not in place" in w and "separate-uid" in w for w in report.backend.warnings)


def test_fallback_mode_grades_as_a_separate_uid_and_sweeps_it(fallback: None, own_uids: range, tmp_path: Path) -> None:
    leaver = write_notebook(tmp_path / "leaver.ipynb", [LEAVER])
    with Grader(backend="local") as g:
        correct = g.grade(CORRECT)
        g.grade(leaver)
    assert correct.score == correct.max_score
    assert {"separate-uid", "uid-sweep", "seccomp-filter", "non-root-uid"} <= set(correct.backend.isolation)
    assert _job_processes(own_uids) == []  # the detached sleepers were killed before the results were read


def test_fallback_mode_closes_staff_directories_to_other_users(fallback: None, tmp_path: Path) -> None:
    staff = tmp_path / "source"
    staff.mkdir(mode=0o755)
    (staff / "solution.py").write_text("ANSWER = 42\n")
    from grader.sandbox import HidingSandbox

    sandbox = LocalSandbox()
    try:
        with Grader(backend=HidingSandbox(sandbox, (staff,))) as g:
            report = g.grade(CORRECT)
    finally:
        sandbox.close()
    assert os.stat(staff).st_mode & 0o077 == 0
    # a source checkout (example solutions, tests, git history) is never closed for its owner: while
    # others can read it, the layer is not claimed (and official grading refuses)
    checkout = source_checkout()
    open_checkout = checkout is not None and os.stat(checkout).st_mode & 0o005 == 0o005
    assert ("hidden-reference" in report.backend.isolation) == (not open_checkout)


@pytest.mark.skipif(not ROOT, reason="per-job cgroups are made by a root grader")
def test_nothing_a_run_creates_outlives_it(tmp_path: Path, own_uids: range, own_cgroups: list[Path]) -> None:
    bomb = write_notebook(tmp_path / "bomb.ipynb", [LEAVER])
    with Grader(backend="local") as g:
        g.grade(bomb)
        g.grade(CORRECT)
    assert own_cgroups and not [p for p in own_cgroups if p.exists()]
    assert _job_processes(own_uids) == []


def test_the_self_test_record_is_only_accepted_first() -> None:
    forged = b'{"mode": "namespaces", "verified": ["everything"], "ok": true}'
    stream = OutputStream(max_total=1 << 20)
    stream.feed(b"I" + b"T" + len(forged).to_bytes(4, "big") + forged)
    assert stream.layer_check is None and stream.broken is not None
    honest = OutputStream(max_total=1 << 20)
    honest.feed(b"T" + len(forged).to_bytes(4, "big") + forged + b"E")
    assert honest.layer_check == {"mode": "namespaces", "verified": ["everything"], "ok": True} and honest.ended


def test_waiting_for_background_work_while_it_is_being_started_joins_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A sandbox closed (``wait``) while a spare is being readied (``later``) once raised
    "cannot join thread before it is started" out of ``grader batch`` on an empty folder."""
    import threading

    from grader.sandbox import process

    starting, done, errors = threading.Event(), threading.Event(), []
    Plain = threading.Thread

    class SlowStart(threading.Thread):
        def start(self) -> None:
            starting.set()
            time.sleep(0.3)  # the window in which ``wait`` used to see a thread not yet started
            super().start()

    monkeypatch.setattr(threading, "Thread", SlowStart)  # the one threading module, as process uses it
    background = process.Background()

    def wait() -> None:
        starting.wait(30)
        try:
            background.wait()
        except RuntimeError as e:
            errors.append(e)

    thread = Plain(target=wait)
    thread.start()
    background.later(done.set)
    thread.join(30)
    assert not errors and done.is_set()
