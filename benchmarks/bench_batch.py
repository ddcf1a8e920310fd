"""Batch throughput of `grader batch` on generated submissions, against the in-process floor.

    python benchmarks/bench_batch.py [--count 200] [--workers N] [--backend local]

Generates COUNT distinct submissions (the bundled ones, each with a unique comment cell, so every
file has its own sha256 and hidden-check seed), then measures in one run:
- throughput with 1 worker and with N workers (default: the number of cores);
- a rerun with nothing changed (everything is up to date);
- the floor: python + numpy + the same probes in-process, one fresh process per submission.
Prints figures and ratios; asserts nothing. `nbgrader autograde` does about 0.5 submissions/s on
such a machine and `otter run` about 0.2 (figures quoted from the issue, not measured here).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBGRADER_PER_S = 0.5


def batch(source: Path, out: Path, workers: int, backend: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(source), "--out", str(out), "--workers",
                    str(workers), "--backend", backend], check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - started


def floor(files: list[Path], work: Path, env: dict[str, str], sample: int) -> float:
    from common import floor_command, floor_jobs

    total = 0.0
    for job_dir in floor_jobs(files[:sample], work):
        started = time.perf_counter()
        subprocess.run(floor_command(job_dir), check=True, env=env, stdout=subprocess.DEVNULL)
        total += time.perf_counter() - started
    return total / sample


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--backend", default="local")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    env = {**os.environ, "GRADER_CACHE": str(work / "cache")}
    try:
        source = work / "class"
        from common import distinct_copies

        files = distinct_copies(sorted((ROOT / "submissions").glob("*.ipynb")), args.count, source, "submission",
                                name="student{n:04d}")
        floor_s = floor(files, work, env, sample=min(20, args.count))
        one = batch(source, work / "one", 1, args.backend, env)
        many = batch(source, work / "many", args.workers, args.backend, env)
        rerun = batch(source, work / "many", args.workers, args.backend, env)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    n = args.count
    print(f"machine: {os.cpu_count()} cores; {n} submissions; backend {args.backend}")
    print(f"floor (python + numpy + probes in-process): {floor_s * 1000:.1f} ms per submission, "
          f"{1 / floor_s:.2f} submissions/s")
    for label, secs in (("1 worker", one), (f"{args.workers} workers", many)):
        print(f"batch, {label:>10}: {secs:6.1f} s, {n / secs:6.2f} submissions/s, {secs / n * 1000:6.1f} ms each "
              f"= {secs / n / floor_s:.2f}x the floor; {n / secs / NBGRADER_PER_S:.0f}x nbgrader's 0.5/s")
    print(f"rerun with nothing changed: {rerun:.2f} s ({rerun / many:.1%} of the full {args.workers}-worker run)")


if __name__ == "__main__":
    main()
