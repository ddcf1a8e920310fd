"""The scaled-out mode against real Redis, PostgreSQL and Celery worker processes: two "hosts",
SIGKILL mid-grading, a broker outage, a database restart, and a graceful shutdown.

The recovery tests run with the shipped timeouts (SHIPPED: no shortened sweeper, visibility or
pending timeout) and bound the time from the fault's end to the result generously (RECOVERY_S,
for a loaded machine; the goal is 30 s); each prints what it measured ("MEASURED ...", -s).

Every test here is marked redis and postgres: without those servers they skip, and with
GRADER_REQUIRE_SERVICES=1 (CI) they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from grader.results.database import Database
from grader.results.tables import Grading, Submission
from grader.service.app import create_app
from grader.service.settings import ServiceSettings
from tests.service.conftest import SUBMISSIONS, Course, make_course, slow_notebook
from tests.service.servers import PostgresServer, RedisServer

pytestmark = [pytest.mark.redis, pytest.mark.postgres, pytest.mark.slow]

FAST: dict[str, Any] = {"pending_timeout_s": 4.0, "sweep_interval_s": 0.5, "visibility_timeout_s": 5.0, "poll_interval_s": 0.1}
WORKER_ENV = {"GRADER_VISIBILITY_TIMEOUT_S": "5", "GRADER_SEED_SECRET": "tests"}
SHIPPED: dict[str, Any] = {"poll_interval_s": 0.1}  # every recovery timeout as shipped
SHIPPED_WORKER_ENV = {"GRADER_SEED_SECRET": "tests"}  # the shipped 600 s visibility timeout
RECOVERY_S = 60.0


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Any]:
    started: list[TestClient] = []

    def start(broker: str, database: str, **timeouts: Any) -> tuple[Course, Database]:
        settings = ServiceSettings(data_dir=tmp_path / "api", broker=broker, database=database, hostname="api@test",
                            **(timeouts or FAST))
        printed: list[str] = []
        client = TestClient(create_app(settings, announce=printed.append))
        client.__enter__()
        started.append(client)
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        return course, client.app.state.db  # type: ignore[attr-defined]

    yield start
    for client in started:
        client.__exit__(None, None, None)


def gradings_of(db: Database, submission_id: str) -> list[Grading]:
    return db.run(lambda s: list(s.scalars(select(Grading).where(Grading.submission_id == submission_id))))


def wait_for(condition: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def grading_on(db: Database, submission_id: str) -> str:
    sub = db.run(lambda s: s.get_one(Submission, submission_id))
    return sub.worker if sub.status == "grading" else ""


def test_two_hosts_grade_every_submission_exactly_once(redis_server: RedisServer, pg_url: str, api: Any,
                                                       make_workers: Any) -> None:
    course, db = api(redis_server.url, pg_url)
    workers = make_workers(redis_server.url, pg_url, **WORKER_ENV)
    workers.start("host-a")
    workers.start("host-b")
    files = sorted(SUBMISSIONS.glob("bug_*.ipynb"))[:6]
    ids = [course.upload("alice" if i % 2 else "bob", f).json()["id"] for i, f in enumerate(files)]
    for i, sid in enumerate(ids):
        assert course.wait(sid, "alice" if i % 2 else "bob", timeout=120)["status"] == "graded"
    rows = db.run(lambda s: s.execute(select(Grading.submission_id, func.count()).group_by(Grading.submission_id)).all())
    assert sorted(rows) == sorted((sid, 1) for sid in ids)
    hosts = db.run(lambda s: set(s.scalars(select(Grading.worker))))
    assert hosts <= {"grader@host-a", "grader@host-b"} and hosts
    metrics = course.client.get("/metrics").text
    assert "grader_workers_seen 2.0" in metrics
    assert 'grader_gradings_total{status="graded"} 6.0' in metrics
    per_worker = re.findall(r'grader_worker_gradings_total\{backend="local",worker="(grader@host-[ab])"\} (\d+)\.0', metrics)
    assert {w for w, _ in per_worker} == hosts and sum(int(n) for _, n in per_worker) == 6, per_worker


def test_sigkill_of_a_worker_mid_grading_another_grades_it_once(redis_server: RedisServer, pg_url: str, api: Any,
                                                                make_workers: Any, tmp_path: Path) -> None:
    course, db = api(redis_server.url, pg_url)
    workers = make_workers(redis_server.url, pg_url, **WORKER_ENV)
    first = workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 4, "kill")).json()["id"]
    assert wait_for(lambda: grading_on(db, sid), 60, "host-a to start grading") == "grader@host-a"
    first.send_signal(signal.SIGKILL)  # mid-grading: nothing acknowledged, nothing stored
    first.wait(10)
    assert gradings_of(db, sid) == []
    workers.start("host-b")
    assert course.wait(sid, "alice", timeout=120)["status"] == "graded"
    time.sleep(FAST["pending_timeout_s"] + 2)  # a late redelivery or sweep must not add a second result
    (only,) = gradings_of(db, sid)
    assert only.worker == "grader@host-b" and only.status == "graded" and only.score == 100.0


def test_a_broker_outage_loses_nothing(own_redis: RedisServer, pg_url: str, api: Any, make_workers: Any) -> None:
    course, db = api(own_redis.url, pg_url)
    workers = make_workers(own_redis.url, pg_url, **WORKER_ENV)
    workers.start("host-a")
    own_redis.stop()
    r = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb")
    assert r.status_code == 202, r.text  # committed to the database; the hand-over failed
    sid = r.json()["id"]
    time.sleep(1)
    assert course.client.get(f"/api/submissions/{sid}", headers=course.students["alice"]).json()["status"] == "queued"
    own_redis.start()  # same port, empty: the job is gone with the old broker
    assert course.wait(sid, "alice", timeout=120)["status"] == "graded"  # the sweeper enqueued it again
    assert len(gradings_of(db, sid)) == 1


def test_a_database_restart_is_survived(redis_server: RedisServer, own_postgres: PostgresServer, api: Any,
                                        make_workers: Any, tmp_path: Path) -> None:
    url = own_postgres.create_database()
    course, db = api(redis_server.url, url)
    workers = make_workers(redis_server.url, url, **WORKER_ENV)
    workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 3, "db")).json()["id"]
    wait_for(lambda: grading_on(db, sid), 60, "grading to start")
    own_postgres.stop()  # while a job is being graded
    restart = threading.Timer(3.0, own_postgres.start)
    restart.start()
    try:
        r = course.upload("bob", SUBMISSIONS / "correct_tinytorch.ipynb")  # during the outage: retried
    finally:
        restart.join()
    assert r.status_code == 202, r.text
    assert course.wait(sid, "alice", timeout=120)["status"] == "graded"
    assert course.wait(r.json()["id"], "bob", timeout=120)["status"] == "graded"
    assert len(gradings_of(db, sid)) == 1


def test_sigterm_drains_the_job_in_progress(redis_server: RedisServer, pg_url: str, api: Any, make_workers: Any,
                                            tmp_path: Path) -> None:
    course, db = api(redis_server.url, pg_url)
    workers = make_workers(redis_server.url, pg_url, **WORKER_ENV)
    proc = workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 3, "drain")).json()["id"]
    wait_for(lambda: grading_on(db, sid), 60, "grading to start")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0, workers.log("host-a")[-3000:]
    (only,) = gradings_of(db, sid)  # finished and stored before the worker exited
    assert only.worker == "grader@host-a" and only.status == "graded"
    assert db.run(lambda s: s.get_one(Submission, sid)).status == "graded"
    assert os.path.exists(workers.root / "host-a" / "worker.log")


def test_a_worker_holds_its_next_job_claimed_and_gives_it_back_on_sigterm(
        redis_server: RedisServer, pg_url: str, api: Any, make_workers: Any, tmp_path: Path) -> None:
    """A worker grading one job at a time already holds the next: claimed (``grading`` on it, so a
    dead worker's held job is handed over too) and waiting, so that its grading starts the moment
    the last one ends. A SIGTERM finishes the grading in progress and gives the held job back."""
    course, db = api(redis_server.url, pg_url)
    workers = make_workers(redis_server.url, pg_url, **WORKER_ENV)
    proc = workers.start("host-a", concurrency=1)
    first = course.upload("alice", slow_notebook(tmp_path, 4, "first")).json()["id"]
    wait_for(lambda: grading_on(db, first), 60, "the first grading to start")
    second = course.upload("bob", slow_notebook(tmp_path, 4, "second")).json()["id"]
    assert wait_for(lambda: grading_on(db, second), 60, "the next job to be held") == "grader@host-a"
    assert grading_on(db, first) == "grader@host-a"  # one grading at a time: the first is not done yet
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(120) == 0, workers.log("host-a")[-3000:]
    (only,) = gradings_of(db, first)
    assert only.worker == "grader@host-a" and only.status == "graded"
    assert gradings_of(db, second) == []  # given back, not graded on the way out
    assert db.run(lambda s: s.get_one(Submission, second)).status == "queued"
    workers.start("host-b")
    assert course.wait(second, "bob", timeout=120)["status"] == "graded"
    (later,) = gradings_of(db, second)
    assert later.worker == "grader@host-b"


# ---- recovery with the shipped timeouts ----------------------------------------------------------


def graded_within(course: Course, ids: dict[str, str], since: float, bound: float) -> float:
    """Wait for every upload (id -> student) to be graded; the seconds from ``since`` to the last."""
    for sid, who in ids.items():
        left = max(1.0, bound - (time.monotonic() - since))
        view = course.wait(sid, who, timeout=min(left, 60))
        assert view["status"] == "graded", view
    elapsed = time.monotonic() - since
    assert elapsed < bound, f"graded {elapsed:.1f} s after the fault ended (bound {bound:.0f} s)"
    return elapsed


def received(workers: Any, host: str) -> int:
    return int(workers.log(host).count("] received"))


def test_a_worker_killed_mid_grading_is_replaced_within_seconds(redis_server: RedisServer, pg_url: str, api: Any,
                                                                make_workers: Any, tmp_path: Path) -> None:
    """Was: left ``grading`` until the 300 s sweep (348 s measured). Now: its heartbeat stops."""
    course, db = api(redis_server.url, pg_url, **SHIPPED)
    workers = make_workers(redis_server.url, pg_url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    workers.start("host-b")
    sid = course.upload("alice", slow_notebook(tmp_path, 6, "kill9")).json()["id"]
    host = wait_for(lambda: grading_on(db, sid), 60, "a worker to start grading")
    victim = host.removeprefix("grader@")
    workers.procs[victim].kill()
    workers.procs[victim].wait(10)
    killed = time.monotonic()
    elapsed = graded_within(course, {sid: "alice"}, killed, RECOVERY_S)
    print(f"MEASURED: killed worker's upload graded {elapsed:.1f} s after the kill -9")
    (only,) = gradings_of(db, sid)
    assert only.worker != host and only.status == "graded" and only.score == 100.0


def test_a_restarted_worker_gives_back_what_it_was_grading(redis_server: RedisServer, pg_url: str, api: Any,
                                                           make_workers: Any, tmp_path: Path) -> None:
    """Killed and restarted under the same name before its heartbeat went stale."""
    course, db = api(redis_server.url, pg_url, **SHIPPED)
    workers = make_workers(redis_server.url, pg_url, **SHIPPED_WORKER_ENV)
    proc = workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 6, "restart")).json()["id"]
    wait_for(lambda: grading_on(db, sid), 60, "host-a to start grading")
    proc.kill()
    proc.wait(10)
    killed = time.monotonic()
    workers.start("host-a")
    elapsed = graded_within(course, {sid: "alice"}, killed, RECOVERY_S)
    print(f"MEASURED: graded {elapsed:.1f} s after its worker was killed and restarted")
    assert len(gradings_of(db, sid)) == 1


def test_uploads_during_a_broker_outage_are_graded_soon_after_it_returns(own_redis: RedisServer, pg_url: str,
                                                                         api: Any, make_workers: Any,
                                                                         tmp_path: Path) -> None:
    """Was: a 20 s outage, 15 uploads accepted, handed over 320-329 s later, the workers idle."""
    course, db = api(own_redis.url, pg_url, **SHIPPED)
    workers = make_workers(own_redis.url, pg_url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    workers.start("host-b")
    own_redis.stop()
    stopped = time.monotonic()
    ids: dict[str, str] = {}
    for i in range(15):
        who = "alice" if i % 2 else "bob"
        r = course.upload(who, slow_notebook(tmp_path, 0, f"outage{i}"))
        assert r.status_code == 202, r.text
        ids[r.json()["id"]] = who
    time.sleep(max(0.0, 20 - (time.monotonic() - stopped)))  # a 20 s outage
    for sid, who in ids.items():
        assert course.client.get(f"/api/submissions/{sid}", headers=course.students[who]).json()["status"] == "queued"
    own_redis.start()
    back = time.monotonic()

    def handed_over() -> bool:
        return not db.run(lambda s: s.scalar(select(func.count()).select_from(Submission).where(
            Submission.id.in_(list(ids)), Submission.enqueued_at.is_(None))))

    wait_for(handed_over, RECOVERY_S, "every upload to be handed over")
    handed = time.monotonic() - back
    elapsed = graded_within(course, ids, back, 2 * RECOVERY_S)  # 15 gradings on two workers take time too
    print(f"MEASURED: 15 uploads made during a 20 s Redis outage handed over {handed:.1f} s and all graded "
          f"{elapsed:.1f} s after it returned")
    assert all(len(gradings_of(db, sid)) == 1 for sid in ids)
    assert received(workers, "host-a") + received(workers, "host-b") == len(ids)


def test_jobs_of_a_broker_restarted_empty_are_sent_again(own_redis: RedisServer, pg_url: str, api: Any,
                                                         make_workers: Any) -> None:
    course, _ = api(own_redis.url, pg_url, **SHIPPED)
    ids = {course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]: "alice",
           course.upload("bob", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]: "bob"}
    broker = redis.Redis.from_url(own_redis.url)
    assert broker.llen("grader") == 2  # in the broker, no worker yet
    own_redis.stop()
    for item in own_redis.dir.iterdir():  # its append-only file gone: it comes back empty
        shutil.rmtree(item) if item.is_dir() else item.unlink()
    own_redis.start()
    back = time.monotonic()
    assert broker.llen("grader") == 0
    workers = make_workers(own_redis.url, pg_url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    elapsed = graded_within(course, ids, back, RECOVERY_S)
    print(f"MEASURED: jobs lost with an emptied Redis graded {elapsed:.1f} s after it returned")
    assert received(workers, "host-a") == 2


def test_a_deep_queue_is_never_sent_twice(redis_server: RedisServer, pg_url: str, api: Any, make_workers: Any,
                                          tmp_path: Path) -> None:
    """Was: everything queued past the pending timeout re-sent, then again every period (650
    tasks for 500 uploads). Here the timeout is 20 s and the queue takes longer than that."""
    course, db = api(redis_server.url, pg_url, pending_timeout_s=20.0, sweep_interval_s=0.5, poll_interval_s=0.1)
    workers = make_workers(redis_server.url, pg_url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    ids = {course.upload(who, slow_notebook(tmp_path, 2, f"deep{i}")).json()["id"]: who
           for i, who in enumerate(["alice", "bob"] * 5)}
    started = time.monotonic()
    for sid, who in ids.items():
        assert course.wait(sid, who, timeout=60)["status"] == "graded"
    print(f"MEASURED: a 10-deep queue drained in {time.monotonic() - started:.1f} s by one worker")
    time.sleep(2)  # a late re-send would be received now
    assert received(workers, "host-a") == len(ids), workers.log("host-a")[-3000:]
    assert all(len(gradings_of(db, sid)) == 1 for sid in ids)


def test_a_database_outage_is_recovered_from_within_seconds(redis_server: RedisServer, own_postgres: PostgresServer,
                                                            api: Any, make_workers: Any, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    """PostgreSQL stopped for 25 s (longer than a worker's heartbeat may be missing) mid-grading:
    the job is graded soon after it is back, once, by the worker that had it, which is never
    taken for dead."""
    url = own_postgres.create_database()
    course, db = api(redis_server.url, url, **SHIPPED)
    workers = make_workers(redis_server.url, url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 4, "pgdown")).json()["id"]
    wait_for(lambda: grading_on(db, sid), 60, "grading to start")
    own_postgres.stop()
    time.sleep(25)
    refused = course.upload("bob", SUBMISSIONS / "correct_tinytorch.ipynb")
    assert refused.status_code == 503 and refused.headers["Retry-After"], refused.text
    own_postgres.start()
    back = time.monotonic()
    later = course.upload("bob", SUBMISSIONS / "correct_tinytorch.ipynb")
    assert later.status_code == 202, later.text
    elapsed = graded_within(course, {sid: "alice", later.json()["id"]: "bob"}, back, RECOVERY_S)
    print(f"MEASURED: graded {elapsed:.1f} s after PostgreSQL came back from a 25 s outage")
    (only,) = gradings_of(db, sid)
    assert only.worker == "grader@host-a"
    time.sleep(8)  # past worker_lost_s of answering store: a live worker is not taken for dead
    assert "is gone" not in caplog.text


def test_a_long_poll_is_woken_across_hosts_by_the_workers_announcement(redis_server: RedisServer, pg_url: str,
                                                                       api: Any, make_workers: Any,
                                                                       tmp_path: Path) -> None:
    """The API's store fallback is off (one read per 600 s): only the worker's ``ended`` over Redis
    pub/sub can end the wait with the final status, before the long poll's own 60 s."""
    course, db = api(redis_server.url, pg_url, poll_interval_s=600.0)
    workers = make_workers(redis_server.url, pg_url, **SHIPPED_WORKER_ENV)
    workers.start("host-a")
    sid = course.upload("alice", slow_notebook(tmp_path, 3, "woken")).json()["id"]
    wait_for(lambda: grading_on(db, sid), 60, "host-a to start grading")
    view = course.client.get(f"/api/submissions/{sid}", params={"wait": 60}, headers=course.students["alice"]).json()
    assert view["final"] and view["status"] == "graded", view


def test_the_service_benchmark_still_runs_and_reports_its_ratio_to_batch(redis_server: RedisServer,
                                                                          postgres_server: PostgresServer) -> None:
    """Not a measurement (nothing is timed here): bench_service.py starts its own Redis, PostgreSQL,
    API and workers from the grader's internals, so a change that breaks it fails here, not the
    next person who measures."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "benchmarks/bench_service.py", "--count", "4", "--clients", "2",
                           "--workers", "1", "--docker-count", "0", "--no-paced", "--overhead-samples", "2"],
                          cwd=root, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    assert "4/4 uploaded, 4 with exactly one result (4 graded), 0 duplicated, 0 without one" in done.stdout
    assert re.search(r"ratio \d+\.\d\d; API process CPU \d+\.\d ms per upload", done.stdout), done.stdout
