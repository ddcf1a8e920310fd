"""Where people wait (issue 13): every row against the in-process floor, measured in one run.

    python benchmarks/bench_latency.py [--repeat 3] [--batch 17] [--no-docker] [--no-hung]

Rows (medians over the repeats, interleaved so that all see the same machine load):
- floor: python + numpy + the same probes in-process, no isolation; one fresh process per
  notebook, and one process for a whole batch (the floor of a batch); and that batch again with
  every check in its own child forked after the import (``floor.py --fork-per-check``): what
  verdicts that never depend on check order cost before any isolation (a lower bound for the
  grader's batch rows, shown against the same floor);
- ``grader grade --backend local``, one file per call: with the warm daemon, and cold
  (``GRADER_NO_DAEMON=1``);
- ``grader grade --backend docker``, one file per call, answered by the warm daemon;
- ``grader batch`` on BATCH distinct notebooks with 1 and with 2 workers (fresh results folder
  and fresh notebooks each time, so nothing is skipped or cached);
- a hung-method notebook (a correct notebook whose ``Embedding.forward`` never returns), warm.

Each row shows wall time, its ratio to the floor, and CPU time: the command's own (its process
and the children it waited for) and, for rows where other processes do the work (the daemon,
dockerd, containerd, the containers), the whole machine's from /proc/stat. The machine's figure
includes whatever else runs: the load average is printed beside it. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from common import ROOT, distinct_copies, floor_jobs

from grader.sandbox.bundle import ensure_bundle

TICK = os.sysconf("SC_CLK_TCK")
HANG = '''\
def _hang(self, *args, **kwargs):
    while True:
        pass


Embedding.forward = _hang
'''


def machine_cpu() -> float:
    """CPU seconds the whole machine has spent so far (user + nice + system + irq + softirq)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:8]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / TICK


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Row:
    label: str
    wall: list[float] = field(default_factory=list)
    own: list[float] = field(default_factory=list)
    machine: list[float] = field(default_factory=list)

    def measure(self, argv: Sequence[str], env: dict[str, str], per: int = 1) -> None:
        m0, c0, t0 = machine_cpu(), children_cpu(), time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        self.wall.append((time.perf_counter() - t0) / per)
        self.own.append((children_cpu() - c0) / per)
        self.machine.append((machine_cpu() - m0) / per)

    def line(self, floor: float, machine: bool) -> str:
        wall, own = statistics.median(self.wall), statistics.median(self.own)
        text = f"{self.label:<52} {wall * 1000:8.0f} ms  {wall / floor:5.2f}x   own CPU {own * 1000:6.0f} ms"
        if machine:
            text += f"   machine CPU {statistics.median(self.machine) * 1000:6.0f} ms"
        return text


def hung_notebook(base: Path, dest: Path) -> Path:
    nb = json.loads(base.read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "id": "hang", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": HANG})
    dest.write_text(json.dumps(nb), encoding="utf-8")
    return dest


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=17)
    parser.add_argument("--no-docker", action="store_true")
    parser.add_argument("--no-hung", action="store_true")
    args = parser.parse_args()

    files = sorted((ROOT / "submissions").glob("*.ipynb"))
    work = Path(tempfile.mkdtemp(prefix="bench-latency-"))
    env = {**os.environ, "GRADER_CACHE": str(work / "cache"), "GRADER_DAEMON_IDLE_S": "600"}
    cold_env = {**env, "GRADER_NO_DAEMON": "1"}
    floor_env = {**env, "OPENBLAS_NUM_THREADS": "1"}  # one BLAS thread, as in the sandbox
    cli = [sys.executable, "-m", "grader.cli"]
    floor_cmd = [sys.executable, str(ROOT / "benchmarks" / "floor.py"), str(ensure_bundle())]
    jobs = floor_jobs(files, work)
    load0 = os.getloadavg()

    rows = {key: Row(label) for key, label in (
        ("floor", "floor, one process per notebook"),
        ("warm", "grader grade --backend local, warm daemon"),
        ("cold", "grader grade --backend local, cold (GRADER_NO_DAEMON=1)"),
        ("docker", "grader grade --backend docker, warm daemon"),
        ("floor_batch", f"floor, {args.batch} notebooks in one process"),
        ("fork_batch", "  the same, one fork per check (no isolation)"),
        ("batch1", f"grader batch, {args.batch} notebooks, 1 worker"),
        ("batch2", f"grader batch, {args.batch} notebooks, 2 workers"),
        ("hung", "hung-method notebook, warm daemon"),
    )}

    def grade(backend: str, path: Path) -> list[str]:
        return [*cli, "grade", "--backend", backend, str(path)]

    # warm-up: bundle, image, daemon, the public checks' expected outputs
    for backend in ("local",) if args.no_docker else ("local", "docker"):
        subprocess.run(grade(backend, files[0]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
        subprocess.run(grade(backend, files[0]), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    for rep in range(args.repeat):
        for f, job in zip(files, jobs, strict=True):
            rows["floor"].measure([*floor_cmd, str(job)], floor_env)
            rows["warm"].measure(grade("local", f), env)
            rows["cold"].measure(grade("local", f), cold_env)
            if not args.no_docker:
                rows["docker"].measure(grade("docker", f), env)
        batch_files = distinct_copies(files, args.batch, work / f"class{rep}", f"repeat {rep}")
        batch_jobs = floor_jobs(batch_files, work / f"floor{rep}")
        rows["floor_batch"].measure([*floor_cmd, *map(str, batch_jobs)], floor_env)
        rows["fork_batch"].measure([*floor_cmd, "--fork-per-check", *map(str, batch_jobs)], floor_env)
        for workers in (1, 2):
            fresh = distinct_copies(files, args.batch, work / f"class{rep}-{workers}", f"repeat {rep} workers {workers}")
            rows[f"batch{workers}"].measure([*cli, "batch", str(fresh[0].parent), "--out", str(work / f"out{rep}-{workers}"),
                                             "--workers", str(workers), "--backend", "local"], env)
    if not args.no_hung:
        hung = hung_notebook(files[files.index(ROOT / "submissions" / "correct_tinytorch.ipynb")], work / "hung.ipynb")
        rows["hung"].measure(grade("local", hung), env)
    load1 = os.getloadavg()
    subprocess.run([*cli, "daemon", "stop"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)

    floor = statistics.median(rows["floor"].wall)
    floor_batch = statistics.median(rows["floor_batch"].wall)
    print(f"machine: {os.cpu_count()} cores; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end; "
          f"{len(files)} notebooks x {args.repeat} repeats (medians)")
    print(f"{'':<52} {'wall':>8}     {'ratio':>6}")
    for key in ("floor", "warm", "cold", "docker"):
        if rows[key].wall:
            print(rows[key].line(floor, machine=key in ("warm", "docker")))
    for key in ("floor_batch", "fork_batch", "batch1", "batch2"):
        print(rows[key].line(floor_batch, machine=False))
    if rows["hung"].wall:
        print(rows["hung"].line(floor, machine=True) + "  (target: at most 1.5x one check's 5 s timeout)")


if __name__ == "__main__":
    main()
