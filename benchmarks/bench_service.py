"""Load on the grading service, scaled-out mode, loopback only, bounded in count and time.

    python benchmarks/bench_service.py [--count 500] [--clients 50] [--workers 1 2] [--backend local]
                                       [--docker-count 100] [--deadline 900]

Starts, on 127.0.0.1 only: a Redis and a PostgreSQL (Debian's binaries, data in /tmp/svc-*), the
API (`grader serve --broker --database`) and N `grader worker` processes (concurrency 1 each, own
cache dir: separate "hosts"). Then COUNT distinct submissions come from CLIENTS concurrent
students, each uploading, waiting on a long poll, then uploading its next file. For each worker
count it prints: all graded, none lost or duplicated (checked in the database), throughput, and
p50/p95/p99 from upload to result. Also measured: the API's own cost per submission (upload
request time, and status request time, with no worker running). With the most workers, a second
phase paces the students (a random think time between uploads, so that arrivals come at 70% of
the capacity just measured): back to back, 50 students keep the queue 50 deep whatever the
speed, so its latency is queue length over throughput. Then DOCKER_COUNT submissions
with the docker backend (skipped, with the reason, without an engine). Everything it started is
stopped by pid at the end; every wait has a deadline.

In the same run, for each worker count: `grader batch --workers N` on the very notebooks that
phase uploads, just before the phase and again just after it (no worker running meanwhile; its
cache warmed first), and the service's results per second as a ratio of batch's over both runs (a
machine that speeds up or slows down during the run moves both sides alike); and the API process's
CPU time per upload (user + system, from /proc, over the phase: the upload and the long polls that
wait for its result, not the course's set-up). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx2 as httpx  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402

from tests.service.servers import PostgresServer, RedisServer, free_port, stop_pid, wait_port  # noqa: E402

NOTEBOOKS = [ROOT / "submissions" / "correct_tinytorch.ipynb"] * 3 + [ROOT / "submissions" / "bug_sin_exponent.ipynb"]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


def submission(n: int) -> tuple[str, bytes]:
    """Distinct notebooks (own sha256, own hidden-check seed): three correct ones in four, one buggy."""
    nb = json.loads(NOTEBOOKS[n % len(NOTEBOOKS)].read_text(encoding="utf-8"))
    nb["cells"].append({"cell_type": "code", "id": f"b{n}", "metadata": {}, "execution_count": None,
                        "outputs": [], "source": f"# submission {n}\n"})
    return f"s{n}.ipynb", json.dumps(nb).encode()


class Stack:
    """Redis, PostgreSQL, the API and the workers, each stopped by pid in ``close``."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.redis = RedisServer().start()
        self.pg = PostgresServer().start()
        self.api: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.hosts = 0
        self.port = free_port()
        self.database = ""
        self.staff: dict[str, str] = {}
        self.late = 0  # uploads the API failed to hand over, as its log said so far

    def start_api(self) -> None:
        self.database = self.pg.create_database()
        log = self.work / "api.log"
        with log.open("wb") as out:
            self.api = subprocess.Popen(
                [sys.executable, "-m", "grader.cli", "serve", "--broker", self.redis.url, "--database", self.database,
                 "--port", str(self.port), "--data", str(self.work / "api")],
                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=os.environ | {"GRADER_LONG_POLL_MAX_S": "120"})
        wait_port(self.port, 60)
        line = next(x for x in log.read_text().splitlines() if "staff sign-in" in x)
        self.staff = {"Authorization": f"Bearer {line.rsplit(' ', 1)[1]}"}

    def start_workers(self, count: int, backend: str) -> None:
        for n in range(count):
            self.hosts += 1
            home = self.work / f"host{self.hosts}"
            home.mkdir()
            with (home / "worker.log").open("wb") as out:
                self.workers.append(subprocess.Popen(
                    [sys.executable, "-m", "grader.cli", "worker", "--broker", self.redis.url, "--database",
                     self.database, "--hostname", f"bench@host{self.hosts}", "--concurrency=1",
                     f"--backend={backend}"],
                    stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                    env=os.environ | {"GRADER_CACHE": str(home / "cache"), "TMPDIR": str(home)}))
            deadline = time.monotonic() + 120
            while " ready." not in (home / "worker.log").read_text(errors="replace"):
                if time.monotonic() > deadline or self.workers[-1].poll() is not None:
                    raise SystemExit(f"worker {n} did not start: {(home / 'worker.log').read_text()[-2000:]}")
                time.sleep(0.2)

    def stop_workers(self) -> None:
        for proc in self.workers:
            stop_pid(proc, signal.SIGTERM, timeout=120)
        self.workers = []

    def close(self) -> None:
        self.stop_workers()
        stop_pid(self.api, signal.SIGTERM, timeout=60)
        self.redis.close()
        self.pg.close()


async def setup_course(http: httpx.AsyncClient, staff: dict[str, str], slug: str, clients: int) -> list[dict[str, str]]:
    await http.post("/api/courses", json={"slug": slug, "title": slug}, headers=staff)
    r = await http.post(f"/api/courses/{slug}/assignments", headers=staff,
                        json={"slug": "m11", "module": "embeddings", "rate_limit": {"count": 10_000, "window_s": 60}})
    r.raise_for_status()
    roster = "student_id\n" + "".join(f"student{n:03d}\n" for n in range(clients))
    r = await http.post(f"/api/courses/{slug}/roster", files={"roster": ("r.csv", roster.encode())}, headers=staff)
    r.raise_for_status()
    return [{"Authorization": f"Bearer {c['token']}"} for c in r.json()["credentials"]]


async def student(http: httpx.AsyncClient, base: str, auth: dict[str, str], files: list[int], deadline: float,
                  latencies: list[float], uploads: list[float], ids: list[str], think: float, busy: list[str]) -> None:
    pace = random.Random(files[0] if files else 0)
    for n in files:
        if think:
            await asyncio.sleep(pace.uniform(0, 2 * think))  # reading the last feedback, editing
        if time.monotonic() > deadline:
            return
        name, content = submission(n)
        t0 = time.perf_counter()
        while True:  # a busy answer (503) is taken as a client should: again after its Retry-After
            sent = time.perf_counter()
            try:
                r = await http.post(f"{base}/submissions", files={"file": (name, content)}, headers=auth)
            except (httpx.ReadError, httpx.RemoteProtocolError):  # a kept-alive connection the server
                busy.append("connection closed while idle; sent again")  # closed as it was reused:
                continue  # an upload is idempotent, so it is simply sent again
            uploads.append(time.perf_counter() - sent)
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            busy.append(r.json().get("detail", ""))
            await asyncio.sleep(float(r.headers.get("retry-after", "5")))
        r.raise_for_status()
        sid = r.json()["id"]
        ids.append(sid)
        while time.monotonic() < deadline:
            view = (await http.get(f"/api/submissions/{sid}", params={"wait": 60}, headers=auth)).json()
            if view["final"]:
                latencies.append(time.perf_counter() - t0)
                break


async def load(stack: Stack, slug: str, count: int, clients: int, deadline_s: float, offset: int,
               think: float = 0.0) -> dict[str, Any]:
    limits = httpx.Limits(max_connections=clients + 10, max_keepalive_connections=clients + 10)
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}", timeout=180, limits=limits) as http:
        auths = await setup_course(http, stack.staff, slug, clients)
        base = f"/api/courses/{slug}/assignments/m11"
        latencies: list[float] = []
        uploads: list[float] = []
        ids: list[str] = []
        busy: list[str] = []
        deadline = time.monotonic() + deadline_s
        assert stack.api is not None
        cpu = cpu_seconds(stack.api.pid)  # the course's set-up is not counted
        t0 = time.perf_counter()
        await asyncio.gather(*(student(http, base, auths[c], list(range(offset + c, offset + count, clients)), deadline,
                                       latencies, uploads, ids, think, busy) for c in range(clients)))
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(stack.api.pid) - cpu
    return {"wall": wall, "latencies": latencies, "uploads": uploads, "ids": ids, "api_cpu": cpu, "busy": busy}


def check_store(database: str, ids: list[str]) -> tuple[int, int, int, dict[str, int]]:
    """(stored once, duplicated, missing, statuses) for these submission ids, from the database."""
    engine = create_engine(database.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as c:
        rows = c.execute(text("SELECT submission_id, count(*), min(status) FROM gradings GROUP BY submission_id")).all()
    engine.dispose()
    counts = {sid: n for sid, n, _ in rows}
    statuses = Counter(status for sid, _, status in rows if sid in set(ids))
    return (sum(1 for i in ids if counts.get(i) == 1), sum(1 for i in ids if counts.get(i, 0) > 1),
            sum(1 for i in ids if i not in counts), dict(statuses))


async def api_overhead(stack: Stack, samples: int) -> dict[str, float]:
    """Upload and status request times with no worker: the API's own cost, apart from grading."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{stack.port}", timeout=60) as http:
        auths = await setup_course(http, stack.staff, "overhead", 1)
        assert stack.api is not None
        cpu = cpu_seconds(stack.api.pid)  # the course's set-up is not counted
        ups, gets = [], []
        for n in range(samples):
            name, content = submission(10_000_000 + n)
            t0 = time.perf_counter()
            r = await http.post("/api/courses/overhead/assignments/m11/submissions", files={"file": (name, content)},
                                headers=auths[0])
            ups.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await http.get(f"/api/submissions/{r.json()['id']}", headers=auths[0])
            gets.append(time.perf_counter() - t0)
        cpu = cpu_seconds(stack.api.pid) - cpu
    return {"upload_p50": statistics.median(ups), "upload_p95": pct(ups, 95), "status_p50": statistics.median(gets),
            "api_cpu": cpu}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def batch_rate(work: Path, first: int, count: int, workers: int, backend: str) -> float:
    """Results per second of ``grader batch --workers N`` on the notebooks ``first`` .. ``first + count``,
    from a copy of the warmed cache (``work/batch-cache``, made on the first call): so a second run on
    the same notebooks computes their seeded expected outputs again, as the service's workers did."""
    source, out, cache = work / f"batch{first}", work / f"batch{first}-out", work / f"batch{first}-cache"
    warmed = work / "batch-cache"
    source.mkdir()
    for n in range(first, first + count):
        name, content = submission(n)
        (source / name).write_bytes(content)
    if warmed.is_dir():
        shutil.copytree(warmed, cache, symlinks=True)
    else:
        cache = warmed  # the first call warms it, and it is kept
    env = os.environ | {"GRADER_CACHE": str(cache), "TMPDIR": str(work)}
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(source), "--out", str(out), "--workers",
                    str(workers), "--backend", backend], check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    wall = time.perf_counter() - started
    shutil.rmtree(source, ignore_errors=True)
    shutil.rmtree(out, ignore_errors=True)
    if cache != warmed:
        shutil.rmtree(cache, ignore_errors=True)
    return count / wall


def worker_cycles(database: str, ids: list[str]) -> tuple[float, float]:
    """(p50, p95) in seconds of the time, on one worker, from one result stored to its next (a
    worker claims its next job while it grades, so a grading's start says little about idle time)."""
    engine = create_engine(database.replace("postgresql://", "postgresql+psycopg://"))
    with engine.connect() as c:
        rows = c.execute(text("SELECT id, worker, finished_at FROM submissions "
                              "WHERE finished_at IS NOT NULL ORDER BY worker, finished_at")).all()
    engine.dispose()
    wanted = set(ids)
    rows = [r for r in rows if r[0] in wanted]
    cycles = [(b[2] - a[2]).total_seconds() for a, b in itertools.pairwise(rows) if a[1] == b[1]]
    return (pct(cycles, 50), pct(cycles, 95)) if cycles else (0.0, 0.0)


def report(label: str, result: dict[str, Any], stack: Stack, count: int) -> None:
    lat, ups = result["latencies"], result["uploads"]
    once, dup, missing, statuses = check_store(stack.database, result["ids"])
    print(f"{label}: {len(result['ids'])}/{count} uploaded, {once} with exactly one result "
          f"({', '.join(f'{n} {s}' for s, n in sorted(statuses.items()))}), {dup} duplicated, {missing} without one; "
          f"{len(lat) / result['wall']:.2f} submissions/s over {result['wall']:.1f} s; "
          f"upload→result p50 {pct(lat, 50):.2f} s, p95 {pct(lat, 95):.2f} s, p99 {pct(lat, 99):.2f} s; "
          f"upload request p50 {1000 * statistics.median(ups):.1f} ms" if lat else f"{label}: nothing graded")
    cycle, cycle95 = worker_cycles(stack.database, result["ids"])
    print(f"  on one worker, from one result stored to its next: p50 {1000 * cycle:.0f} ms, p95 {1000 * cycle95:.0f} ms")
    if result["busy"]:
        kinds = Counter(detail.split(";")[0] for detail in result["busy"])
        print(f"  {len(result['busy'])} upload(s) sent again (503 and its Retry-After, or a closed connection): "
              + "; ".join(f"{n}x {kind!r}" for kind, n in kinds.items()))
    log = (stack.work / "api.log").read_text(errors="replace")
    late = log.count("left queued for the sweeper") - stack.late
    stack.late += late
    if late:
        print(f"  {late} upload(s) not handed to the broker at once (the sweeper sent them): see {stack.work}/api.log")


def docker_problem() -> str | None:
    try:
        from grader.sandbox.image import docker_client

        docker_client(timeout=10)
    except Exception as e:
        return str(e).splitlines()[0]
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=500)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--docker-count", type=int, default=100)
    parser.add_argument("--deadline", type=float, default=900, help="seconds per phase at most")
    parser.add_argument("--overhead-samples", type=int, default=100)
    parser.add_argument("--no-paced", dest="paced", action="store_false",
                        help="skip the phase with think time between a student's uploads")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="svc-bench-", dir="/tmp"))
    stack = Stack(work)
    try:
        stack.start_api()
        offset, rate = 0, 0.0
        batch_rate(work, 10 * args.count * len(args.workers), 2, 1, "local")  # batch's cache warmed, not timed
        # workers, uploads, results/s, API CPU s, batch results/s before and after
        phases: list[tuple[int, int, float, float, float, float]] = []
        for n in args.workers:
            first = offset
            before = batch_rate(work, first, args.count, n, "local")  # the floor, bracketing the phase
            stack.start_workers(n, "local")
            result = asyncio.run(load(stack, f"local{n}", args.count, args.clients, args.deadline, offset))
            cpu = result["api_cpu"]
            report(f"local backend, {n} worker(s), {args.clients} clients back to back", result, stack, args.count)
            rate = len(result["latencies"]) / result["wall"]
            offset += args.count
            if n == max(args.workers) and args.paced:
                # students who read their feedback before the next upload: arrivals at 70% of capacity
                think = args.clients / (0.7 * rate)
                result = asyncio.run(load(stack, f"paced{n}", args.count, args.clients, args.deadline, offset, think))
                report(f"local backend, {n} worker(s), {args.clients} clients, {think:.0f} s mean think time "
                       f"(arrivals at 70% of that capacity)", result, stack, args.count)
                offset += args.count
            stack.stop_workers()
            after = batch_rate(work, first, args.count, n, "local")
            phases.append((n, len(result["ids"]), rate, cpu, before, after))
        problem = docker_problem() if args.docker_count else "not asked for"
        if problem is None:
            stack.start_workers(max(args.workers), "docker")
            result = asyncio.run(load(stack, "docker", args.docker_count, min(args.clients, args.docker_count),
                                      args.deadline, offset))
            report(f"docker backend, {max(args.workers)} worker(s)", result, stack, args.docker_count)
            stack.stop_workers()
        else:
            print(f"docker backend: skipped ({problem})")
        # last, with no worker left: these uploads stay queued and slow no other phase down
        overhead = asyncio.run(api_overhead(stack, args.overhead_samples))
        cpu = overhead["api_cpu"]
        print(f"API overhead, no worker running: upload p50 {1000 * overhead['upload_p50']:.1f} ms, "
              f"p95 {1000 * overhead['upload_p95']:.1f} ms; status p50 {1000 * overhead['status_p50']:.1f} ms; "
              f"API CPU {1000 * cpu / max(1, args.overhead_samples):.1f} ms per upload + one status request")
        for n, uploads, service_rate, api_cpu, before, after in phases:
            batch = 2 / (1 / before + 1 / after)  # both runs' notebooks over both runs' time
            print(f"service vs batch, {n} worker(s): service {service_rate:.2f} results/s, `grader batch --workers {n}` "
                  f"{batch:.2f} results/s on the same {uploads} notebooks ({before:.2f} just before, {after:.2f} just "
                  f"after): ratio {service_rate / batch:.2f}; "
                  f"API process CPU {1000 * api_cpu / max(1, uploads):.1f} ms per upload (upload + long polls)")
    finally:
        stack.close()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
