"""The benchmarks' shared parts still run (a benchmark is not a timed test: nothing is timed here).
They import the grader's internals, so a refactor that breaks them must fail CI, not the next
person who measures."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]


def benchmark_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_floor_runs_every_check_of_a_real_job_with_and_without_a_fork_per_check(tmp_path: Path) -> None:
    common = benchmark_module("common")
    (job_dir,) = common.floor_jobs([ROOT / "submissions" / "correct_tinytorch.ipynb"], tmp_path)
    job = json.loads((job_dir / "job.json").read_text(encoding="utf-8"))
    assert job["checks"] and {c["visible"] for c in job["checks"]} == {True, False}  # hidden checks too
    assert json.loads((job_dir / "student.json").read_text(encoding="utf-8"))["chunks"]
    for extra in ([], ["--fork-per-check"]):
        command = common.floor_command(job_dir)
        run = subprocess.run([*command[:3], *extra, *command[3:]], capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
