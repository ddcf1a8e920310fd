"""The harness's check runners (grader/harness/runners.py): each check in its own process forked
after the import, so no check sees what another changed; one check's fate its own."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.harness.runners import Runners

Outcome = dict[str, dict[str, Any]]


def run(tmp_path: Path, checks: list[dict[str, Any]], behave: Callable[[dict[str, Any]], Any],
        parallel: int = 1) -> Outcome:
    """Run ``checks`` (each ``behave(check)`` in a runner) and return what was written or reported."""
    out = tmp_path / "out"
    out.mkdir()

    def execute(check: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        return {"value": behave(check), "pid": os.getpid(), "duration_ms": 0.0}, {}

    def write(check_id: str, record: dict[str, Any], arrays: dict[str, Any]) -> None:
        (out / f"{check_id}.json").write_text(json.dumps(record))

    def report(check_id: str, status: dict[str, Any]) -> None:
        (out / f"{check_id}.status.json").write_text(json.dumps(status))

    runners = Runners(parallel, execute, write, report, time.monotonic)
    cwd = os.getcwd()
    os.chdir(tmp_path)  # the runners look for out/<check>.json here, as in a job directory
    try:
        runners.run(checks)
    finally:
        runners.close()
        os.chdir(cwd)
    return {p.name.split(".")[0]: json.loads(p.read_text()) for p in sorted(out.iterdir())}


def checks(n: int, timeout_s: float = 2.0) -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "timeout_s": timeout_s} for i in range(n)]


@pytest.fixture(autouse=True)
def _one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "1")


def test_every_check_starts_with_the_same_random_generators(tmp_path: Path) -> None:
    import random

    np.random.seed(7)
    got = run(tmp_path, checks(4), lambda check: [float(np.random.random()), random.random()])
    assert len({json.dumps(r["value"]) for r in got.values()}) == 1


@pytest.mark.parametrize("parallel", [1, 2])
def test_what_a_check_changes_never_reaches_another(tmp_path: Path, parallel: int) -> None:
    """A class attribute or a module-level cache that a check changes (as a student's forward
    might) is back as it was after the import for every other check, however they are scheduled."""

    class Layer:
        calls = 0

    cache: dict[str, int] = {}

    def behave(check: dict[str, Any]) -> list[int]:
        Layer.calls += 1
        cache[check["id"]] = Layer.calls
        return [Layer.calls, len(cache)]

    got = run(tmp_path, checks(5), behave, parallel=parallel)
    assert [r["value"] for r in got.values()] == [[1, 1]] * 5
    assert len({r["pid"] for r in got.values()}) == 5


def test_a_crash_costs_only_its_check(tmp_path: Path) -> None:
    def behave(check: dict[str, Any]) -> str:
        if check["id"] == "c1":
            os._exit(7)
        return "ok"

    got = run(tmp_path, checks(3), behave)
    assert got["c1"]["status"] == "crashed" and got["c1"]["exit_code"] == 7
    assert got["c0"]["value"] == got["c2"]["value"] == "ok"


def test_a_check_that_leaves_a_thread_behind_gets_no_successor_in_its_process(tmp_path: Path) -> None:
    def behave(check: dict[str, Any]) -> int:
        if check["id"] == "c0":
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
        return threading.active_count()

    got = run(tmp_path, checks(2), behave)
    assert got["c0"]["pid"] != got["c1"]["pid"]
    assert got["c1"]["value"] == 1


def test_a_hung_function_blocks_the_checks_that_call_it_later(tmp_path: Path) -> None:
    namespace: dict[str, Any] = {}
    exec(compile("def spin():\n    while True:\n        pass\n", "<cell 3>", "exec"), namespace)

    def behave(check: dict[str, Any]) -> str:
        if check["id"] != "c2":
            namespace["spin"]()
        return "ok"

    started = time.monotonic()
    got = run(tmp_path, checks(12, timeout_s=1.0), behave)
    # eleven checks call spin: a timeout each would take 11 s; one, then "blocked", takes about 1 s
    # (the bound leaves room for a machine at a load average of 10)
    assert time.monotonic() - started < 6
    assert got["c0"]["status"] == "timeout" and "reason" not in got["c0"]
    for blocked in ("c1", "c3", "c11"):
        assert got[blocked]["status"] == "timeout"
        assert got[blocked]["reason"].startswith("blocked by c0 timeout: spin (cell 3, line ")
    assert got["c2"]["value"] == "ok"


def test_a_forged_stack_costs_only_its_own_check(tmp_path: Path) -> None:
    """A check that answers the parent's stack request itself, with a frame whose line number has
    thousands of digits (more than int() takes), times out alone; the later checks still run."""
    import signal
    import stat

    def forge(*_: Any) -> None:
        frame = f'File "<cell 3>", line {"9" * 5000} in spin\n'.encode()
        for fd in range(3, 64):
            try:
                if stat.S_ISFIFO(os.fstat(fd).st_mode):
                    os.write(fd, frame)
            except OSError:
                pass

    def behave(check: dict[str, Any]) -> str:
        if check["id"] == "c0":
            signal.signal(signal.SIGUSR1, forge)
            while True:
                time.sleep(0.01)
        return "ok"

    got = run(tmp_path, checks(3, timeout_s=1.0), behave)
    assert got["c0"]["status"] == "timeout"
    assert got["c1"]["value"] == got["c2"]["value"] == "ok"
