"""Fixtures of the service tests: an embedded app on SQLite with a course, an assignment, a roster
and credentials; helpers to upload and wait. Real grading (local backend) unless a test fakes it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from grader.service.app import create_app
from grader.service.settings import ServiceSettings
from tests.service.servers import PostgresServer, RedisServer, postgres_bindir, redis_binary, stop_pid

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"
EMBEDDINGS_RUBRIC = ROOT / "grader" / "modules" / "embeddings" / "rubric.toml"
# bug_sin_exponent's score and the sin_values check's points, as the current rubric gives them
SIN_EXPONENT_SCORE = float(json.loads((ROOT / "tests" / "golden" / "bug_sin_exponent.ipynb.json").read_text())["score"])
SIN_POINTS = next(float(m) for m in re.findall(r'id = "sin_values"\n[^\n]*\npoints = ([0-9.]+)',
                                                EMBEDDINGS_RUBRIC.read_text(encoding="utf-8")))
ROSTER = "student_id,name,email\nalice,Alice Liddell,alice@example.edu\nbob,Bob Stone,bob@example.edu\n"


@dataclass
class Course:
    client: TestClient
    staff: dict[str, str]
    students: dict[str, dict[str, str]]  # student id -> auth header
    base: str  # /api/courses/<course>/assignments/<assignment>

    def upload(self, who: str, path: Path, *, name: str | None = None, content: bytes | None = None,
               headers: dict[str, str] | None = None) -> Any:
        data = content if content is not None else path.read_bytes()
        return self.client.post(f"{self.base}/submissions", headers=headers or self.students[who],
                                files={"file": (name or path.name, data, "application/octet-stream")})

    def wait(self, submission_id: str, who: str, timeout: float = 60) -> dict[str, Any]:
        r = self.client.get(f"/api/submissions/{submission_id}", params={"wait": timeout},
                            headers=self.students.get(who, self.staff))
        assert r.status_code == 200, r.text
        view: dict[str, Any] = r.json()
        assert view["final"], f"not graded within {timeout} s: {view}"
        return view

    def result(self, submission_id: str, who: str) -> Any:
        return self.client.get(f"/api/submissions/{submission_id}/result", headers=self.students.get(who, self.staff))


def browser(app: Any, base_url: str = "http://testserver", **kwargs: Any) -> TestClient:
    """A client that posts forms as a browser does: with this site's ``Origin``."""
    return TestClient(app, base_url=base_url, headers={"Origin": base_url}, **kwargs)


def slow_notebook(tmp_path: Path, seconds: float, tag: str) -> Path:
    """The correct solution, made to take ``seconds`` while the sandbox imports it."""
    source = (SUBMISSIONS / "correct_source.py").read_text(encoding="utf-8")
    patched = source.replace("class Embedding:\n", f"class Embedding:\n    import time as _t; _t.sleep({seconds})  # {tag}\n", 1)
    assert patched != source
    path = tmp_path / f"slow_{tag}.py"
    path.write_text(patched, encoding="utf-8")
    return path


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_course(client: TestClient, staff_token: str, *, policy: dict[str, Any] | None = None,
                rate_limit: dict[str, int] | None = None, **assignment: Any) -> Course:
    staff = bearer(staff_token)
    r = client.post("/api/courses", json={"slug": "cs249", "title": "ML systems"}, headers=staff)
    assert r.status_code == 201, r.text
    body = {"slug": "m11", "module": "embeddings", **assignment}  # two units installed: it names its module
    if policy is not None:
        body["policy"] = policy
    if rate_limit is not None:
        body["rate_limit"] = rate_limit
    r = client.post("/api/courses/cs249/assignments", json=body, headers=staff)
    assert r.status_code == 201, r.text
    r = client.post("/api/courses/cs249/roster", files={"roster": ("roster.csv", ROSTER.encode(), "text/csv")},
                    headers=staff)
    assert r.status_code == 200, r.text
    students = {c["student_id"]: bearer(c["token"]) for c in r.json()["credentials"]}
    return Course(client, staff, students, "/api/courses/cs249/assignments/m11")


@pytest.fixture
def settings(tmp_path: Path) -> ServiceSettings:
    return ServiceSettings(data_dir=tmp_path / "data", workers=2, official=True, hostname="embedded@test")


@pytest.fixture
def embedded(settings: ServiceSettings) -> Iterator[tuple[TestClient, str]]:
    """A started embedded service and its first staff token (as printed on first start)."""
    printed: list[str] = []
    with browser(create_app(settings, announce=printed.append)) as client:
        assert len(printed) == 1 and "Bearer staff_" in printed[0]
        yield client, printed[0].rsplit(" ", 1)[1]


@pytest.fixture
def course(embedded: tuple[TestClient, str]) -> Course:
    client, token = embedded
    return make_course(client, token)


# ---- real Redis, PostgreSQL and Celery workers ------------------------------------------------------


def _missing(what: str, install: str) -> None:
    """Skip with the reason; with GRADER_REQUIRE_SERVICES=1 (set by CI) fail instead, so these
    tests can never silently stop running."""
    message = f"{what} is not installed ({install})"
    if os.environ.get("GRADER_REQUIRE_SERVICES") == "1":
        pytest.fail(f"GRADER_REQUIRE_SERVICES=1 but {message}", pytrace=False)
    pytest.skip(message)


def _redis() -> RedisServer:
    if redis_binary() is None:
        _missing("redis-server", "apt-get install redis-server")
    return RedisServer().start()


def _postgres() -> PostgresServer:
    if postgres_bindir() is None:
        _missing("PostgreSQL", "apt-get install postgresql")
    return PostgresServer().start()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    server = _redis()
    yield server
    server.close()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = _postgres()
    yield server
    server.close()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    """A Redis of this test alone, which it may stop and start."""
    server = _redis()
    yield server
    server.close()


@pytest.fixture
def own_postgres() -> Iterator[PostgresServer]:
    """A PostgreSQL of this test alone, which it may stop and start."""
    server = _postgres()
    yield server
    server.close()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A fresh, empty database on the shared server."""
    return postgres_server.create_database()


class Workers:
    """Real ``grader worker`` processes; each a "host" with its own name, data and cache dirs."""

    def __init__(self, root: Path, broker: str, database: str, env: dict[str, str]) -> None:
        self.root, self.broker, self.database, self.env = root, broker, database, env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, host: str, concurrency: int = 1) -> subprocess.Popen[bytes]:
        home = self.root / host
        home.mkdir(parents=True, exist_ok=True)
        env = os.environ | self.env | {"GRADER_CACHE": str(home / "cache"), "TMPDIR": str(home)}
        with (home / "worker.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "grader.cli", "worker", "--broker", self.broker, "--database", self.database,
                 "--data", str(home / "data"), "--hostname", f"grader@{host}", f"--concurrency={concurrency}"],
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        self.procs[host] = proc
        self.wait_ready(host)
        return proc

    def wait_ready(self, host: str, timeout: float = 60) -> None:
        log = self.root / host / "worker.log"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = log.read_text(errors="replace")
            if " ready." in text:
                return
            if self.procs[host].poll() is not None:
                raise AssertionError(f"worker {host} exited: {text[-3000:]}")
            time.sleep(0.1)
        raise AssertionError(f"worker {host} not ready after {timeout} s: {log.read_text(errors='replace')[-3000:]}")

    def log(self, host: str) -> str:
        return (self.root / host / "worker.log").read_text(errors="replace")

    def close(self) -> None:
        for proc in self.procs.values():
            stop_pid(proc, signal.SIGTERM, timeout=60)


@pytest.fixture
def make_workers(tmp_path: Path) -> Iterator[Any]:
    made: list[Workers] = []

    def make(broker: str, database: str, **env: str) -> Workers:
        workers = Workers(tmp_path / "hosts", broker, database, {k: str(v) for k, v in env.items()})
        made.append(workers)
        return workers

    yield make
    for workers in made:
        workers.close()
