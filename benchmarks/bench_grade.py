"""Speed of `grader grade --backend local` against an in-process floor, measured in one run.

    python benchmarks/bench_grade.py [--repeat 5] [--batch 20]

Per submission: a fresh `grader grade` process per file, against a fresh floor process per file
(python + numpy import + the same probes run in-process, no isolation, no reference, no judging).
`grader grade` hands its work to the warm per-user daemon (grader/daemon.py) after the first run;
the same calls with GRADER_NO_DAEMON=1 show the cold cost.
Batch: one `grader grade` call on N files. Prints medians and ratios; it asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, floor_command, floor_jobs


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=20)
    args = parser.parse_args()

    files = sorted((ROOT / "submissions").glob("*.ipynb"))
    work = Path(tempfile.mkdtemp(prefix="bench-"))
    env = {**os.environ, "GRADER_CACHE": str(work / "cache")}
    jobs = floor_jobs(files, work)

    grade = [sys.executable, "-m", "grader.cli", "grade", "--backend", "local"]
    cold_env = {**env, "GRADER_NO_DAEMON": "1"}
    timed([*grade, str(files[0])], env)  # build bundle and reference caches once; start the daemon
    time.sleep(1.0)  # let the daemon finish starting
    floor_s, grade_s, cold_s = [], [], []
    for _ in range(args.repeat):  # interleaved, so all see the same machine load
        for f, job_dir in zip(files, jobs, strict=True):
            floor_s.append(timed(floor_command(job_dir), env))
            grade_s.append(timed([*grade, str(f)], env))
            cold_s.append(timed([*grade, str(f)], cold_env))

    batch_files = [str(files[i % len(files)]) for i in range(args.batch)]
    batch_floor = [sum(timed(floor_command(jobs[i % len(jobs)]), env) for i in range(args.batch)) / args.batch
                   for _ in range(max(1, args.repeat // 2))]
    batch_grade = [timed([*grade, *batch_files], env) / args.batch for _ in range(max(1, args.repeat // 2))]
    subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=env, stdout=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)

    f_med, g_med, c_med = statistics.median(floor_s), statistics.median(grade_s), statistics.median(cold_s)
    bf, bg = statistics.median(batch_floor), statistics.median(batch_grade)
    print(f"machine: {os.cpu_count()} cores; {len(files)} submissions x {args.repeat} repeats")
    print(f"floor (python + numpy + probes in-process), per submission: {f_med * 1000:7.1f} ms")
    print(f"grader grade --backend local, one file per call (daemon):   {g_med * 1000:7.1f} ms  "
          f"ratio {g_med / f_med:.2f}x")
    print(f"  the same with GRADER_NO_DAEMON=1 (every call cold):       {c_med * 1000:7.1f} ms  "
          f"ratio {c_med / f_med:.2f}x")
    print(f"grader grade --backend local, {args.batch} files in one call, per file:  {bg * 1000:7.1f} ms  "
          f"ratio {bg / bf:.2f}x (floor {bf * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
