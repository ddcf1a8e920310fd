"""Speed of `tito test --module embeddings` in a TinyTorch-shaped checkout, against the in-process floor.

    python benchmarks/bench_tito.py [--repeat 5]

Per submission, a checkout with `modules/11_embeddings/11_embeddings.ipynb`, a stub `tito`
package (a `TinyTorchCLI` with a hard-coded command table) and TinyTorch's console script as pip
writes it (`bin/tito`), which reaches the grader through its startup hook (grader/titohook.py).
Timed from launching the command to its exit, interleaved with a fresh floor process on the same
notebook (python + numpy import + the same public-check probes run in-process: no isolation, no
reference, no judging, no output).

- first: a fresh install's first run: an empty cache (the sandbox bundle and the reference's
  expected outputs are made on the way) and no daemon; it starts the daemon after its answer,
  and that start counts, since the run ends after it;
- warm: later runs, answered by the daemon;
- cold: later runs with GRADER_NO_DAEMON=1 (warm cache, no daemon).
Also timed: the same command routed through upstream's `main` (`tito --verbose test --module ...`;
the stub's main is nearly free, so that line is a lower bound for a real TinyTorch install), and
`grader grade --public-only` on the same notebook, to show what `tito` adds to the core pipeline.
Prints medians and ratios; it asserts nothing.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from common import floor_command, floor_jobs  # noqa: E402

from grader.rubric import load_rubric  # noqa: E402

STUB_MAIN = '''\
import argparse, sys

class TestCommand:
    def __init__(self, config): self.config = config
    description = "stub"
    def add_arguments(self, parser): parser.add_argument("module", nargs="?")
    def execute(self, args): return 0

class TinyTorchCLI:
    def __init__(self): self.commands = {"test": TestCommand}
    def run(self, argv):
        parser = argparse.ArgumentParser(prog="tito")
        parser.add_argument("--verbose", action="store_true")
        sub = parser.add_subparsers(dest="command")
        for name, cls in self.commands.items():
            cls(None).add_arguments(sub.add_parser(name))
        args = parser.parse_args(argv)
        return self.commands[args.command](None).execute(args)

def main():
    return TinyTorchCLI().run(sys.argv[1:])
'''


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - started


UPSTREAM_SCRIPT = """\
import sys
from tito.main import main
if __name__ == "__main__":
    sys.exit(main())
"""


def checkout(root: Path, notebook: Path) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "tito").write_text(UPSTREAM_SCRIPT, encoding="utf-8")
    (root / "tito").mkdir(parents=True)
    (root / "tito" / "__init__.py").write_text("", encoding="utf-8")
    (root / "tito" / "main.py").write_text(STUB_MAIN, encoding="utf-8")
    (root / "modules" / "11_embeddings").mkdir(parents=True)
    shutil.copyfile(notebook, root / "modules" / "11_embeddings" / "11_embeddings.ipynb")
    return root


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    files = sorted((ROOT / "submissions").glob("*.ipynb"))
    rubric = load_rubric()
    public = rubric.select(public_only=True)  # what `tito test --module` grades by default
    work = Path(tempfile.mkdtemp(prefix="bench-tito-"))
    env = {**os.environ, "GRADER_CACHE": str(work / "cache")}
    cases = []
    for f, job_dir in zip(files, floor_jobs(files, work, public), strict=True):
        cases.append((checkout(work / "checkouts" / f.stem, f), job_dir))

    def tito(co: Path, *args: str) -> list[str]:
        return [sys.executable, str(co / "bin" / "tito"), *args]

    def with_checkout(environment: dict[str, str], co: Path) -> dict[str, str]:
        return {**environment, "PYTHONPATH": str(co)}  # as after TinyTorch's `pip install -e .`

    grade = [sys.executable, "-m", "grader.cli", "grade", "--public-only", "modules/11_embeddings/11_embeddings.ipynb"]
    stop = [sys.executable, "-m", "grader.cli", "daemon", "stop"]
    first_s: list[float] = []
    for n in range(args.repeat):  # a fresh install each time: nothing cached, no daemon
        for i, (co, _) in enumerate(cases):
            fresh = {**env, "GRADER_CACHE": str(work / f"fresh-{n}-{i}")}
            first_s.append(timed(tito(co, "test", "--module", "embeddings"), co, with_checkout(fresh, co)))
            time.sleep(1.5)  # let the daemon finish starting before stopping it
            subprocess.run(stop, env=fresh, stdout=subprocess.DEVNULL, check=False)
    timed(tito(cases[0][0], "test", "--module", "embeddings"), cases[0][0], with_checkout(env, cases[0][0]))
    time.sleep(1.5)  # the shared cache is made and its daemon started
    cold_env = {**env, "GRADER_NO_DAEMON": "1"}
    floor_env = {**env, "OPENBLAS_NUM_THREADS": "1"}  # one BLAS thread, as in the sandbox
    cold_s: list[float] = []
    floor_s: list[float] = []
    direct_s: list[float] = []
    routed_s: list[float] = []
    grade_s: list[float] = []
    for _ in range(args.repeat):  # interleaved, so all of them see the same machine load
        for co, job_dir in cases:
            floor_s.append(timed(floor_command(job_dir), co, floor_env))
            direct_s.append(timed(tito(co, "test", "--module", "embeddings"), co, with_checkout(env, co)))
            routed_s.append(timed(tito(co, "--verbose", "test", "--module", "embeddings"), co, with_checkout(env, co)))
            grade_s.append(timed(grade, co, env))
            cold_s.append(timed(tito(co, "test", "--module", "embeddings"), co, with_checkout(cold_env, co)))
    subprocess.run(stop, env=env, stdout=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)

    f_med, d_med, r_med, g_med = (statistics.median(x) for x in (floor_s, direct_s, routed_s, grade_s))
    print(f"machine: {os.cpu_count()} cores; {len(cases)} submissions x {args.repeat} repeats; "
          f"{len(public)} public checks; TinyTorch's bin/tito with the grader's startup hook")
    print(f"floor (python + numpy + probes in-process), per submission: {f_med * 1000:7.1f} ms")
    first = statistics.median(first_s)
    print(f"first run of a fresh install (empty cache, starts the daemon): {first * 1000:7.1f} ms  ratio {first / f_med:.2f}x")
    print(f"tito test --module embeddings, warm daemon:                  {d_med * 1000:7.1f} ms  ratio {d_med / f_med:.2f}x")
    print(f"tito --verbose test --module embeddings (via upstream main): {r_med * 1000:7.1f} ms  ratio {r_med / f_med:.2f}x")
    print(f"grader grade --public-only (same notebook, for comparison):  {g_med * 1000:7.1f} ms  ratio {g_med / f_med:.2f}x")
    c_med = statistics.median(cold_s)
    print(f"tito test --module embeddings, GRADER_NO_DAEMON=1 (cold):    {c_med * 1000:7.1f} ms  ratio {c_med / f_med:.2f}x")
    try:
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    print(f"load average during the run: {load} (ratios drift up when other work competes for the cores)")


if __name__ == "__main__":
    main()
