"""Docker vs local vs the in-process floor, per submission and in batches, measured in one run.

    python benchmarks/bench_docker.py [--repeat 3] [--batch 16] [--parallel 1 2 4]

Per submission: wall time and machine CPU (all processes, dockerd and containerd included, from
/proc/stat) of one `Grader.grade` call on each backend in a warm grader process, against the floor
(python + numpy + the same probes in-process, one fresh process per submission).
Batch: submissions/s with N containers in parallel (`grader batch --backend docker --workers N`).
Prints figures and ratios; asserts nothing. Needs a running Docker engine and the image
(`bash .ci/docker-engine.sh`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT, floor_command, floor_jobs

from grader import Grader

TICK = os.sysconf("SC_CLK_TCK")
TARGET_S = 1.5  # a warm grader's docker grading of one submission, on an unloaded 2-core machine


def busy_seconds() -> float:
    """CPU time spent by the whole machine so far (user + nice + system + irq + softirq)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / TICK


def measure(fn, *args, **kwargs) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """(wall seconds, machine CPU seconds) of one call."""
    cpu0, t0 = busy_seconds(), time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0, busy_seconds() - cpu0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--parallel", type=int, nargs="+", default=[1, 2, 4])
    args = parser.parse_args()
    files = sorted((ROOT / "submissions").glob("*.ipynb"))
    work = Path(tempfile.mkdtemp(prefix="bench-docker-"))
    os.environ["GRADER_CACHE"] = str(work / "cache")
    jobs = floor_jobs(files, work)

    results: dict[str, list[tuple[float, float]]] = {"floor": [], "local": [], "docker": []}
    with Grader(backend="local") as local, Grader(backend="docker") as docker:
        local.grade(files[0]), docker.grade(files[0])  # warm: image, zygote, reference worker
        for _ in range(args.repeat):  # interleaved, so all three see the same machine load
            for f, job_dir in zip(files, jobs, strict=True):
                results["floor"].append(measure(subprocess.run, floor_command(job_dir), check=True,
                                                stdout=subprocess.DEVNULL))
                results["local"].append(measure(local.grade, f))
                results["docker"].append(measure(docker.grade, f))

    source = work / "class"
    source.mkdir()
    for n in range(args.batch):
        nb = json.loads(files[n % len(files)].read_text())
        nb["cells"].append({"cell_type": "code", "id": f"b{n}", "metadata": {}, "execution_count": None,
                            "outputs": [], "source": f"# {n}\n"})
        (source / f"s{n:03d}.ipynb").write_text(json.dumps(nb))
    throughput = {}
    for workers in args.parallel:
        wall, cpu = measure(
            subprocess.run, [sys.executable, "-m", "grader.cli", "batch", str(source), "--out", str(work / f"out{workers}"),
                             "--backend", "docker", "--workers", str(workers)], check=True, stdout=subprocess.DEVNULL)
        throughput[workers] = (args.batch / wall, cpu / args.batch)
    shutil.rmtree(work, ignore_errors=True)

    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for k, v in results.items()}
    floor_wall, floor_cpu = med["floor"]
    print(f"machine: {os.cpu_count()} cores; {len(files)} submissions x {args.repeat} repeats (medians)")
    for name in ("floor", "local", "docker"):
        wall, cpu = med[name]
        print(f"{name:>7}: {wall * 1000:7.1f} ms wall ({wall / floor_wall:4.2f}x floor), "
              f"{cpu * 1000:7.1f} ms machine CPU ({cpu / max(floor_cpu, 1e-9):4.2f}x floor)")
    fastest = min(w for w, _ in results["docker"])
    print(f"target: a warm docker grading of one submission within {TARGET_S:g} s: "
          f"{'met' if fastest <= TARGET_S else 'missed'} (fastest {fastest:.2f} s)")
    base = throughput[args.parallel[0]][0]
    for workers, (rate, cpu) in throughput.items():
        print(f"docker batch, {workers} parallel container(s): {rate:5.2f} submissions/s "
              f"({rate / base:4.2f}x of {args.parallel[0]}), {cpu * 1000:6.1f} ms machine CPU each")


if __name__ == "__main__":
    main()
