"""``grader serve`` as a user runs it: one command, SQLite in a data folder, the staff sign-in
printed on the first start only, the whole flow over real HTTP, SIGTERM for a clean stop."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import httpx2 as httpx
import pytest

from tests.service.conftest import ROOT, ROSTER, SUBMISSIONS, slow_notebook
from tests.service.servers import free_port, stop_pid, wait_port

pytestmark = pytest.mark.slow


def serve(data: Path, port: int, log: Path, **env: str) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--data", str(data), "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                                env=os.environ | {"GRADER_NO_DAEMON": "1"} | env)
    wait_port(port, 60)
    return proc


def sigterm(proc: subprocess.Popen[bytes]) -> float:
    """Stop ``grader serve`` as systemd does; the seconds until it exited."""
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    assert proc.wait(120) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
    return time.monotonic() - signalled


def test_grader_serve_alone_serves_the_whole_flow(tmp_path: Path) -> None:
    port, data = free_port(), tmp_path / "data"
    proc = serve(data, port, tmp_path / "first.log")
    try:
        lines = [line for line in (tmp_path / "first.log").read_text().splitlines() if "staff sign-in" in line]
        assert len(lines) == 1
        staff = {"Authorization": f"Bearer {lines[0].rsplit(' ', 1)[1]}"}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            assert http.post("/api/courses", json={"slug": "c", "title": "C"}, headers=staff).status_code == 201
            assert http.post("/api/courses/c/assignments", json={"slug": "a", "module": "embeddings"},
                             headers=staff).status_code == 201
            creds = http.post("/api/courses/c/roster", files={"roster": ("r.csv", ROSTER.encode())},
                              headers=staff).json()["credentials"]
            alice = {"Authorization": f"Bearer {creds[0]['token']}"}
            sub = http.post("/api/courses/c/assignments/a/submissions", headers=alice,
                            files={"file": ("nb.ipynb", (SUBMISSIONS / "correct_tinytorch.ipynb").read_bytes())})
            assert sub.status_code == 202
            done = http.get(f"/api/submissions/{sub.json()['id']}", params={"wait": 60}, headers=alice).json()
            assert done["status"] == "graded"
            result = http.get(f"/api/submissions/{done['id']}/result", headers=alice).json()["result"]
            assert result["score"] == 100.0
            assert http.get("/docs").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) in (0, -signal.SIGTERM)  # uvicorn re-raises the signal after a clean shutdown
    assert "Application shutdown complete" in (tmp_path / "first.log").read_text()
    assert (data / "grader.sqlite").is_file()
    again = serve(data, port, tmp_path / "second.log")
    time.sleep(0.5)
    stop_pid(again)
    assert "staff sign-in" not in (tmp_path / "second.log").read_text()


def test_a_worker_whose_broker_does_not_answer_says_so_once_and_keeps_trying(tmp_path: Path) -> None:
    """Celery would print "Cannot connect ... Trying again" on every try (a hundred, then give up)."""
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "worker", "--broker", f"redis://127.0.0.1:{free_port()}/0",
                                 "--database", f"sqlite:///{tmp_path / 'db.sqlite'}"], stdout=out, stderr=subprocess.STDOUT,
                                cwd=ROOT)
    try:
        deadline = time.monotonic() + 120
        while "does not answer" not in log.read_text(errors="replace") and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text(errors="replace")
            time.sleep(0.5)
        time.sleep(13)  # Celery's next tries come after 2, 4 and 6 s: three more, which must stay quiet
        assert proc.poll() is None, "the worker gave up on its broker"
        text = log.read_text(errors="replace")
        assert text.count("does not answer") == 1 and "Trying again" not in text, text
        assert "start it, or fix --broker" in text
    finally:
        stop_pid(proc, signal.SIGKILL)


def test_quiet_retries_say_an_outage_once_and_the_next_one_again() -> None:
    import logging

    from celery.worker.consumer.consumer import CONNECTION_ERROR

    from grader.service.tasks import QuietRetries

    said: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    consumer, connection = (logging.getLogger(f"celery.worker.consumer.{n}") for n in ("consumer", "connection"))
    handler, quiet = Keep(), QuietRetries().install()
    levels = [logger.level for logger in (consumer, connection)]
    for logger in (consumer, connection):
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)  # as the worker's --loglevel=INFO sets it
    try:
        for _ in range(3):
            consumer.error(CONNECTION_ERROR, "redis://127.0.0.1:9/0", "Connection refused.", "Trying again in 2 s")
        connection.info("Connected to %s", "redis://127.0.0.1:9/0")
        consumer.error(CONNECTION_ERROR, "redis://127.0.0.1:9/0", "Connection refused.", "Trying again in 2 s")
    finally:
        for logger, level in zip((consumer, connection), levels, strict=True):
            logger.removeHandler(handler)
            logger.removeFilter(quiet)
            logger.setLevel(level)
    assert [m.split(" does not answer")[0] for m in said] == ["the broker redis://127.0.0.1:9/0",
                                                                "Connected to redis://127.0.0.1:9/0",
                                                                "the broker redis://127.0.0.1:9/0"]
    assert not any("Trying again" in m for m in said)


def _course(http: httpx.Client, log: Path) -> list[dict[str, str]]:
    line = next(x for x in log.read_text().splitlines() if "staff sign-in" in x)
    staff = {"Authorization": f"Bearer {line.rsplit(' ', 1)[1]}"}
    assert http.post("/api/courses", json={"slug": "c", "title": "C"}, headers=staff).status_code == 201
    assert http.post("/api/courses/c/assignments", json={"slug": "a", "module": "embeddings"}, headers=staff).status_code == 201
    creds = http.post("/api/courses/c/roster", files={"roster": ("r.csv", ROSTER.encode())},
                      headers=staff).json()["credentials"]
    return [{"Authorization": f"Bearer {c['token']}"} for c in creds]


def _statuses(data: Path) -> dict[str, tuple[str, int]]:
    """Each submission's status and number of stored gradings, read from the SQLite file."""
    with sqlite3.connect(data / "grader.sqlite") as db:
        rows = db.execute("SELECT s.id, s.status, (SELECT count(*) FROM gradings g WHERE g.submission_id = s.id) "
                          "FROM submissions s").fetchall()
    return {sid: (status, n) for sid, status, n in rows}


def _wait_grading(http: httpx.Client, ids: dict[str, dict[str, str]], count: int) -> set[str]:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        grading = {sid for sid, auth in ids.items()
                   if http.get(f"/api/submissions/{sid}", headers=auth).json()["status"] == "grading"}
        if len(grading) >= count:
            return grading
        time.sleep(0.1)
    raise AssertionError(f"{count} gradings did not start within 60 s")


def test_sigterm_finishes_the_gradings_in_progress_and_leaves_the_queue(tmp_path: Path) -> None:
    """Was: the port closed, then the whole queue was graded before the process exited."""
    port, data = free_port(), tmp_path / "data"
    proc = serve(data, port, tmp_path / "first.log")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            students = _course(http, tmp_path / "first.log")
            ids: dict[str, dict[str, str]] = {}
            for i in range(6):
                path = slow_notebook(tmp_path, 5, f"term{i}")
                r = http.post("/api/courses/c/assignments/a/submissions", headers=students[i % 2],
                              files={"file": (path.name, path.read_bytes())})
                assert r.status_code == 202, r.text
                ids[r.json()["id"]] = students[i % 2]
            in_progress = _wait_grading(http, ids, 2)  # the pool's two threads
    finally:
        took = sigterm(proc)
    print(f"MEASURED: SIGTERM with 2 gradings in progress and 4 queued: exited after {took:.1f} s")
    assert took < 60
    after = _statuses(data)
    assert {sid: after[sid] for sid in in_progress} == {sid: ("graded", 1) for sid in in_progress}
    left = {sid: after[sid] for sid in ids if sid not in in_progress}
    assert left == {sid: ("queued", 0) for sid in left}, after
    assert "Application shutdown complete" in (tmp_path / "first.log").read_text()
    again = serve(data, port, tmp_path / "second.log")  # the queue left is graded at the next start
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            for sid in left:
                view = http.get(f"/api/submissions/{sid}", params={"wait": 60}, headers=ids[sid]).json()
                if not view["final"]:
                    view = http.get(f"/api/submissions/{sid}", params={"wait": 60}, headers=ids[sid]).json()
                assert view["status"] == "graded", view
    finally:
        stop_pid(again, timeout=120)


def test_sigterm_leaves_a_grading_past_the_grace_for_the_next_start(tmp_path: Path) -> None:
    """A grading longer than GRADER_SHUTDOWN_GRACE_S does not hold the stop: it is left unstored
    (never scored as failed) and graded again at the next start."""
    port, data = free_port(), tmp_path / "data"
    proc = serve(data, port, tmp_path / "first.log", GRADER_SHUTDOWN_GRACE_S="1")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            students = _course(http, tmp_path / "first.log")
            path = slow_notebook(tmp_path, 15, "grace")
            r = http.post("/api/courses/c/assignments/a/submissions", headers=students[0],
                          files={"file": (path.name, path.read_bytes())})
            assert r.status_code == 202, r.text
            sid = r.json()["id"]
            _wait_grading(http, {sid: students[0]}, 1)
    finally:
        took = sigterm(proc)
    print(f"MEASURED: SIGTERM with a 15 s grading in progress, 1 s grace: exited after {took:.1f} s")
    assert took < 60
    assert _statuses(data)[sid] == ("grading", 0)
    assert "left for the next start" in (tmp_path / "first.log").read_text()
    again = serve(data, port, tmp_path / "second.log")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            view = http.get(f"/api/submissions/{sid}", params={"wait": 60}, headers=students[0]).json()
            assert view["status"] == "graded", view
    finally:
        stop_pid(again, timeout=120)


def test_a_staff_credential_is_rotated_from_the_command_line(tmp_path: Path) -> None:
    """Was: a staff token could be neither rotated nor revoked (``--add-staff`` refuses a name it has)."""
    data = tmp_path / "data"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "grader.cli", "serve", "--data", str(data), *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=300, env=os.environ | {"GRADER_NO_DAEMON": "1"})

    def bearer(done: subprocess.CompletedProcess[str]) -> dict[str, str]:
        assert done.returncode == 0 and "staff sign-in for ta" in done.stdout, done.stderr
        return {"Authorization": f"Bearer {done.stdout.split()[-1]}"}

    old = bearer(cli("--add-staff", "ta"))
    unknown = cli("--rotate-staff", "nobody")
    assert unknown.returncode == 2 and "--add-staff nobody makes one" in unknown.stderr, unknown.stderr
    new = bearer(cli("--rotate-staff", "ta"))
    port = free_port()
    proc = serve(data, port, tmp_path / "serve.log")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            assert http.get("/api/me", headers=old).status_code == 401
            assert http.get("/api/me", headers=new).status_code == 200
            audit = http.get("/api/audit", headers=new).json()
            assert [a["action"] for a in audit if a["target"] == "ta"] == ["rotate_staff", "add_staff"]  # newest first
    finally:
        stop_pid(proc)
