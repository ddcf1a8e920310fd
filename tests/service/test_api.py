"""The staff and student flows of the API on the embedded service (real grading, SQLite)."""

from __future__ import annotations

import csv
import io
import json
import time
import zipfile
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from grader.service.app import create_app
from grader.service.settings import ServiceSettings
from tests.service.conftest import EMBEDDINGS_RUBRIC, SIN_EXPONENT_SCORE, SIN_POINTS, SUBMISSIONS, Course, make_course


def test_release_policy_after_due_date_after_published_and_total(embedded: tuple[TestClient, str]) -> None:
    client, token = embedded
    future = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    course = make_course(client, token, due_at=future,
                         policy={"checks": {"sin_values": "after_due_date", "emb_lookup": "after_published"},
                                 "total": "after_published"})
    sid = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]
    course.wait(sid, "alice")

    def mine() -> dict[str, dict[str, object]]:
        result = course.result(sid, "alice").json()["result"]
        return {"total": result["score"], **{c["id"]: c for c in result["checks"]}}

    before = mine()
    assert before["total"] is None
    assert not before["sin_values"]["released"] and "status" not in before["sin_values"]
    assert not before["emb_lookup"]["released"] and before["emb_shape"]["status"] == "passed"
    past = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    assert client.patch(course.base, json={"due_at": past}, headers=course.staff).status_code == 200
    after_due = mine()
    assert after_due["sin_values"]["status"] == "failed" and "Called:" in str(after_due["sin_values"]["message"])
    assert not after_due["emb_lookup"]["released"] and after_due["total"] is None
    assert client.patch(course.base, json={"published": True}, headers=course.staff).status_code == 200
    published = mine()
    assert published["emb_lookup"]["status"] == "passed" and published["total"] == SIN_EXPONENT_SCORE


def test_regrade_keeps_history_and_the_latest_counts(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]
    course.wait(sid, "alice")
    rubric = EMBEDDINGS_RUBRIC.read_text(encoding="utf-8")
    points = f'id = "sin_values"\ntitle = "Sinusoid values follow the Vaswani formula"\npoints = {SIN_POINTS:g}'
    changed = rubric.replace(points, points.replace(f"points = {SIN_POINTS:g}", f"points = {SIN_POINTS - 3:g}"))
    assert changed != rubric, "the rubric's sin_values entry moved: update this test"
    r = course.client.patch(course.base, json={"rubric_toml": changed}, headers=course.staff)
    assert r.status_code == 200 and r.json()["max_score"] == 97.0
    assert course.client.post(f"{course.base}/regrade", headers=course.staff).json() == {"regrading": 1}
    assert course.wait(sid, "alice")["generation"] == 2
    staff = course.result(sid, "staff").json()
    assert [(h["generation"], h["score"], h["max_score"]) for h in staff["history"]] == [
        (1, SIN_EXPONENT_SCORE, 100.0), (2, SIN_EXPONENT_SCORE, 97.0)]
    assert staff["history"][0]["rubric_hash"] != staff["history"][1]["rubric_hash"]
    assert course.result(sid, "alice").json()["result"]["max_score"] == 97.0
    one = course.client.post(f"/api/submissions/{sid}/regrade", headers=course.staff)
    assert one.status_code == 202 and one.json()["generation"] == 3
    assert course.wait(sid, "alice")["generation"] == 3


def test_override_with_reason_and_audit(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]
    course.wait(sid, "alice")
    short = course.client.post(f"/api/submissions/{sid}/override", json={"score": 95}, headers=course.staff)
    assert short.status_code == 422  # a reason is required
    r = course.client.post(f"/api/submissions/{sid}/override", json={"score": 95, "reason": "regrade request #12"},
                           headers=course.staff)
    assert r.status_code == 201
    staff = r.json()
    assert staff["score"] == 95 and staff["score_source"] == "override"
    assert staff["overrides"][0]["reason"] == "regrade request #12" and staff["overrides"][0]["staff"] == "admin"
    student = course.result(sid, "alice").json()["result"]
    assert student["score"] == 95 and student["overridden"] and "regrade request" not in json.dumps(student)
    audit = course.client.get("/api/audit", headers=course.staff).json()
    assert audit[0]["action"] == "override" and audit[0]["target"] == sid and "regrade request #12" in audit[0]["detail"]
    csv_text = course.client.get(f"{course.base}/export/csv", headers=course.staff).text
    assert "95" in csv_text  # exports use the score that counts


def test_an_override_stands_through_regrades_until_staff_remove_it(course: Course) -> None:
    sid = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]
    course.wait(sid, "alice")
    automatic = course.result(sid, "alice").json()["result"]["score"]
    assert course.client.delete(f"/api/submissions/{sid}/override", headers=course.staff).status_code == 404
    r = course.client.post(f"/api/submissions/{sid}/override", json={"score": 90, "reason": "regrade request #3"},
                           headers=course.staff)
    assert r.status_code == 201
    assert course.client.post(f"/api/submissions/{sid}/regrade", headers=course.staff).status_code == 202
    assert course.wait(sid, "alice")["generation"] == 2
    staff = course.client.get(f"/api/submissions/{sid}/result", headers=course.staff).json()
    assert staff["score"] == 90 and staff["score_source"] == "override"
    assert staff["automatic"] == {"now": automatic, "max_score": 100.0, "at_override": automatic}
    assert course.result(sid, "alice").json()["result"]["score"] == 90
    assert "90" in course.client.get(f"{course.base}/export/csv", headers=course.staff).text
    removed = course.client.delete(f"/api/submissions/{sid}/override", headers=course.staff)
    assert removed.status_code == 200 and removed.json()["score"] == automatic
    assert removed.json()["score_source"] == "grading" and removed.json()["overrides"][0]["removed_by"] == "admin"
    audit = course.client.get("/api/audit", headers=course.staff).json()
    assert audit[0]["action"] == "remove_override" and audit[0]["target"] == sid


def test_exports_in_every_batch_format_and_stats(course: Course) -> None:
    a = course.upload("alice", SUBMISSIONS / "bug_sin_exponent.ipynb").json()["id"]
    course.wait(a, "alice")
    for fmt in ("canvas", "moodle", "nbgrader", "otter", "csv"):
        r = course.client.get(f"{course.base}/export/{fmt}", headers=course.staff)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv"), fmt
        assert f"{SIN_EXPONENT_SCORE:g}" in r.text, fmt
    nbgrader = list(csv.DictReader(io.StringIO(course.client.get(f"{course.base}/export/nbgrader",
                                                                 headers=course.staff).text)))
    assert {(row["student_id"], row["score"]) for row in nbgrader} == {("alice", f"{SIN_EXPONENT_SCORE:.1f}"), ("bob", "0.0")}
    problems = json.loads(course.client.get(f"{course.base}/export/csv", headers=course.staff)
                          .headers["x-grader-problems"])
    assert any("bob" in p for p in problems)  # bob has no submission: said, not hidden
    gs = course.client.get(f"{course.base}/export/gradescope", headers=course.staff)
    names = zipfile.ZipFile(io.BytesIO(gs.content)).namelist()
    assert gs.status_code == 200 and names == ["alice/results.json"]
    assert course.client.get(f"{course.base}/export/pdf", headers=course.staff).status_code == 422
    stats = course.client.get(f"{course.base}/stats", headers=course.staff).json()
    by_id = {c["id"]: c for c in stats["checks"]}
    assert stats["students"] == 1 and by_id["sin_values"]["passed"] == 0 and by_id["emb_shape"]["pass_rate"] == 1.0


def test_long_poll_events_metrics_and_health(course: Course) -> None:
    sid = course.upload("bob", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
    with course.client.stream("GET", f"/api/submissions/{sid}/events", headers=course.students["bob"]) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[5:]) for line in r.iter_lines() if line.startswith("data:")]
    assert events[-1]["status"] == "graded" and events[-1]["final"]
    assert all(not e["final"] for e in events[:-1])
    metrics = course.client.get("/metrics").text
    assert 'grader_queue_depth{state="queued"} 0.0' in metrics
    assert "grader_workers_seen 1.0" in metrics and 'grader_gradings_total{status="graded"} 1.0' in metrics
    assert 'grader_grading_latency_seconds_bucket{le="+Inf"} 1.0' in metrics
    assert course.client.get("/healthz").json()["status"] == "ok"
    assert "/api/submissions/{submission_id}" in course.client.get("/openapi.json").json()["paths"]


class Dropping:
    """A dispatcher that accepts nothing: as if the process stopped before grading."""

    def enqueue(self, submission_id: str, generation: int) -> bool:
        return False

    def close(self) -> None:
        pass


def test_work_accepted_before_a_stop_is_graded_at_the_next_start(settings: ServiceSettings) -> None:
    printed: list[str] = []
    with TestClient(create_app(settings, dispatcher=Dropping(), announce=printed.append)) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        sid = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
        assert client.get(f"/api/submissions/{sid}", headers=course.students["alice"]).json()["status"] == "queued"
    again: list[str] = []
    with TestClient(create_app(settings, announce=again.append)) as client:
        course.client = client
        assert course.wait(sid, "alice")["status"] == "graded"
    assert again == []  # the staff sign-in is printed on the first start only


def test_shutdown_finishes_grading_in_progress(settings: ServiceSettings, tmp_path: Path) -> None:
    printed: list[str] = []
    with TestClient(create_app(settings, announce=printed.append)) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        sid = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
    # the pool drained before the app stopped: the result is there without any further start
    with TestClient(create_app(settings, dispatcher=Dropping())) as client:
        course.client = client
        assert client.get(f"/api/submissions/{sid}", headers=course.students["alice"]).json()["status"] == "graded"


class Refusing:
    """A dispatcher whose broker is down until ``accepting`` is set; records what it was handed."""

    def __init__(self) -> None:
        self.accepting = False
        self.sent: list[tuple[str, int]] = []

    def enqueue(self, submission_id: str, generation: int) -> bool:
        if self.accepting:
            self.sent.append((submission_id, generation))
        return self.accepting

    def close(self) -> None:
        pass


def test_an_upload_the_broker_refused_is_handed_over_at_the_first_sweep_it_answers(settings: ServiceSettings) -> None:
    """Was: re-sent only once older than GRADER_PENDING_TIMEOUT_S (300 s)."""
    broker = Refusing()
    printed: list[str] = []
    with TestClient(create_app(replace(settings, sweep_interval_s=0.2), dispatcher=broker,
                               announce=printed.append)) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        sid = course.upload("alice", SUBMISSIONS / "correct_tinytorch.ipynb").json()["id"]
        time.sleep(1)
        assert broker.sent == []
        broker.accepting = True
        deadline = time.monotonic() + 30
        while not broker.sent and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1)  # more sweeps: it was handed over, and is not sent again
        assert broker.sent == [(sid, 1)]


def test_a_worker_tries_its_lost_broker_again_every_few_seconds(tmp_path: Path, monkeypatch: Any) -> None:
    """Was: kombu's pauses between tries grow to 30 s, so after a long Redis outage a worker came
    back up to 30 s after Redis did. Celery's consumer calls ensure_connection with no intervals."""
    import kombu.connection

    from grader.service.tasks import RECONNECT_MAX_S, make_celery

    seen: list[tuple[float, float, float]] = []

    def retry_over_time(_fun: Any, _catch: Any, _args: Any, _kwargs: Any, _errback: Any, _max_retries: Any,
                        start: float, step: float, most: float, *_: Any, **__: Any) -> None:
        seen.append((start, step, most))

    monkeypatch.setattr(kombu.connection, "retry_over_time", retry_over_time)
    app = make_celery(ServiceSettings(data_dir=tmp_path, broker="redis://127.0.0.1:9/0"))
    with app.connection_for_read() as conn:
        conn.ensure_connection(None, None, callback=None)  # as the worker's consumer asks
        conn.ensure_connection(None, None, interval_max=30)
    assert seen == [(1, 1, RECONNECT_MAX_S)] * 2 and RECONNECT_MAX_S <= 5
