"""The service's edge under abuse: uploads read only in bounded workers with their caps first,
refused uploads counted, an atomic rate limit (SQLite and PostgreSQL), bodies refused by size
before they are read, caps on waiting connections, a bounded queue, and idle sockets closed."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event

from grader.errors import Busy
from grader.service import uploads
from grader.service.app import create_app
from grader.service.settings import ServiceSettings
from tests.service.conftest import ROOT, SUBMISSIONS, Course, make_course
from tests.service.servers import free_port, stop_pid, wait_port

SOURCE = (SUBMISSIONS / "correct_source.py").read_bytes()


class Parked:
    """A dispatcher that keeps every upload queued (nothing is graded)."""

    def __init__(self) -> None:
        self.jobs: list[str] = []

    def enqueue(self, submission_id: str, generation: int) -> bool:
        self.jobs.append(submission_id)
        return True

    def close(self) -> None:
        pass


@contextmanager
def parked_service(settings: ServiceSettings) -> Iterator[tuple[TestClient, str]]:
    printed: list[str] = []
    with TestClient(create_app(settings, dispatcher=Parked(), announce=printed.append)) as client:
        yield client, printed[0].rsplit(" ", 1)[1]


@pytest.fixture
def parked(settings: ServiceSettings) -> Iterator[tuple[TestClient, str]]:
    with parked_service(settings) as service:
        yield service


@contextmanager
def counted_reads(engine: Any, keep: Callable[[str], bool]) -> Iterator[list[str]]:
    """The SQL statements run on ``engine`` meanwhile that ``keep`` accepts, as they run."""
    reads: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if keep(statement):
            reads.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        yield reads
    finally:
        event.remove(engine, "before_cursor_execute", count)


def own_read(statement: str) -> bool:
    """A read of one submission's row: what a waiter does for itself (not a count of the queue)."""
    return "FROM submissions" in statement and "submissions.id = " in statement and "count(" not in statement


# ---- uploads are read in bounded workers, caps first ------------------------------------------------


def test_uploads_are_read_in_a_worker_never_in_the_api_process(parked: tuple[TestClient, str], tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.load

    course = make_course(*parked)

    readers = tmp_path / "readers"
    real = grader.load.load_submission

    def recording(*args: Any, **kwargs: Any) -> Any:
        with readers.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(*args, **kwargs)

    for where in ("grader.load", "grader.intake", "grader.service.ops", "grader.service.web.code"):
        monkeypatch.setattr(f"{where}.load_submission", recording, raising=False)
    uploads.shutdown()  # fresh workers, forked after the patch
    assert course.upload("alice", SUBMISSIONS / "correct_source.py").status_code == 202
    assert course.upload("alice", SUBMISSIONS / "x.ipynb", content=b"{nope").status_code == 422
    pids = readers.read_text().split()
    assert len(pids) == 2 and str(os.getpid()) not in pids


def test_the_cell_cap_holds_before_jupytext_reads_a_source(course: Course, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import jupytext

    called = tmp_path / "jupytext-called"
    real = jupytext.reads

    def recording(*args: Any, **kwargs: Any) -> Any:
        called.touch()
        return real(*args, **kwargs)

    monkeypatch.setattr(jupytext, "reads", recording)
    uploads.shutdown()
    many = b"# %%\nx = 1\n" * 40_000  # 440 kB: within the size limit
    r = course.upload("alice", SUBMISSIONS / "x.py", content=many)
    assert r.status_code == 422 and "2000-cell limit" in r.json()["detail"]
    assert not called.exists()
    assert course.upload("alice", SUBMISSIONS / "correct_source.py").status_code == 202
    assert called.exists()  # the patch reaches the worker: a source within the cap is read by jupytext


def test_a_class_uploading_at_once_waits_to_be_read_and_only_a_flood_past_the_byte_budget_is_busy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Was: 35 uploads arriving together (a class of 50 at the deadline) got 503s. Here readers are
    held: 100 ordinary uploads wait their turn; a flood of 4 MiB files is refused once the waiting
    bytes would pass the budget, before anything of it is read, and taken again once they drain."""
    from grader.load import LoadLimits

    uploads.shutdown()
    gate = threading.Event()

    def held(stored: str, content: bytes, limits: Any) -> Any:
        gate.wait(60)
        return stored  # the file's name stands for what it read

    monkeypatch.setattr(uploads, "_read", held)
    limits = LoadLimits()
    notebook, big = b"n" * 50_000, b"b" * (4 * 1024 * 1024)
    waiting = [uploads._submit(f"s{i}.ipynb", notebook, limits) for i in range(100)]
    taken = 0
    with pytest.raises(Busy, match="busy reading other uploads"):
        while taken < 100:
            waiting.append(uploads._submit(f"big{taken}.ipynb", big, limits))
            taken += 1
    assert taken == (uploads.BACKLOG_BYTES - 100 * len(notebook)) // len(big)
    gate.set()
    read: list[Any] = [f.result(timeout=60) for f in waiting]
    assert read[:2] == ["s0.ipynb", "s1.ipynb"] and len(read) == 100 + taken
    later: Any = uploads._submit("later.ipynb", big, limits).result(timeout=60)
    assert later == "later.ipynb"
    uploads.shutdown()


def test_a_refused_upload_counts_against_the_rate_limit(embedded: tuple[TestClient, str]) -> None:
    client, token = embedded
    course = make_course(client, token, rate_limit={"count": 2, "window_s": 3600})
    for n in range(2):
        r = course.upload("alice", SUBMISSIONS / "x.ipynb", content=b"{nope %d" % n)
        assert r.status_code == 422, r.text
    r = course.upload("alice", SUBMISSIONS / "correct_source.py")
    assert r.status_code == 429 and "refused ones count too" in r.json()["detail"]
    assert 3500 < int(r.headers["retry-after"]) <= 3601
    assert course.upload("bob", SUBMISSIONS / "correct_source.py").status_code == 202
    audit = client.get("/api/audit", headers=course.staff).json()
    assert [a["actor"] for a in audit if a["action"] == "refuse_upload"] == ["alice", "alice"]


def test_an_upload_over_the_size_limit_is_413(course: Course) -> None:
    r = course.upload("alice", SUBMISSIONS / "x.ipynb", content=b" " * (5 * 2**20 + 10))
    assert r.status_code == 413 and "5120 KiB limit" in r.json()["detail"]


# ---- the rate limit is atomic --------------------------------------------------------------------


def _race(course: Course, uploads_at_once: int, readable: bool) -> list[int]:
    barrier = threading.Barrier(uploads_at_once)

    def one(n: int) -> int:
        content = SOURCE + f"# {n}\n".encode() if readable else b"{nope %d" % n
        barrier.wait()
        return int(course.upload("alice", SUBMISSIONS / ("x.py" if readable else "x.ipynb"), content=content)
                   .status_code)

    with ThreadPoolExecutor(uploads_at_once) as pool:
        return list(pool.map(one, range(uploads_at_once)))


# Was, for unreadable files: 24 sent at once at a limit of 2 were all read (and refused, 422): the
# limit was checked before the reading and counted after it.
@pytest.mark.parametrize("readable", [True, False], ids=["readable", "unreadable"])
def test_the_rate_limit_holds_under_concurrent_uploads_on_sqlite(parked: tuple[TestClient, str],
                                                                  readable: bool) -> None:
    course = make_course(*parked, rate_limit={"count": 2, "window_s": 3600})
    statuses = _race(course, 24, readable)
    assert sorted(statuses) == [202 if readable else 422] * 2 + [429] * 22


@pytest.mark.parametrize("readable", [True, False], ids=["readable", "unreadable"])
def test_the_rate_limit_holds_under_concurrent_uploads_on_postgresql(tmp_path: Path, pg_url: str,
                                                                      readable: bool) -> None:
    settings = ServiceSettings(data_dir=tmp_path / "data", database=pg_url, hostname="api@test")
    with parked_service(settings) as (client, token):
        course = make_course(client, token, rate_limit={"count": 2, "window_s": 3600})
        statuses = _race(course, 24, readable)
        assert sorted(statuses) == [202 if readable else 422] * 2 + [429] * 22
        audit = client.get("/api/audit", headers=course.staff).json()
        assert [a["action"] for a in audit if a["action"] in ("read_upload", "refuse_upload")] == \
            ([] if readable else ["refuse_upload"] * 2)  # every reservation settled


def test_an_upload_the_readers_could_not_take_does_not_count(parked: tuple[TestClient, str],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    course = make_course(*parked, rate_limit={"count": 1, "window_s": 3600})

    async def busy(*_: Any) -> None:
        raise Busy("the readers are busy", retry_after=5)

    with monkeypatch.context() as m:
        m.setattr(uploads, "validate_upload", busy)
        assert course.upload("alice", SUBMISSIONS / "correct_source.py").status_code == 503
    assert course.upload("alice", SUBMISSIONS / "correct_source.py").status_code == 202


# ---- the queue is bounded ---------------------------------------------------------------------------


def test_a_full_queue_answers_503_with_retry_after_and_uploads_show_their_place(settings: ServiceSettings) -> None:
    with parked_service(replace(settings, queue_per_assignment=2)) as (client, token):
        course = make_course(client, token)
        first = course.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 1\n")
        second = course.upload("bob", SUBMISSIONS / "x.py", content=SOURCE + b"# 2\n")
        assert (first.status_code, second.status_code) == (202, 202)
        assert (first.json()["queue_place"], second.json()["queue_place"]) == (1, 2)
        full = course.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 3\n")
        assert full.status_code == 503 and full.headers["retry-after"] == "60"
        assert "upload it again in a minute" in full.json()["detail"]
        polled = client.get(f"/api/submissions/{second.json()['id']}", headers=course.students["bob"]).json()
        assert polled["queue_place"] == 2
        with client.stream("GET", f"/api/submissions/{second.json()['id']}/events",
                           headers=course.students["bob"]) as events:
            data = next(line for line in events.iter_lines() if line.startswith("data: "))
        assert json.loads(data.removeprefix("data: "))["queue_place"] == 2  # what the upload page shows
        again = course.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 1\n")
        assert again.status_code == 202 and again.json()["created"] is False  # the same file: its id, as before


def test_the_queue_is_bounded_in_all_assignments_too(settings: ServiceSettings) -> None:
    with parked_service(replace(settings, queue_total=2)) as (client, token):
        course = make_course(client, token)
        r = client.post("/api/courses/cs249/assignments", json={"slug": "m12", "module": "attention"},
                        headers=course.staff)
        assert r.status_code == 201, r.text
        other = replace(course, base="/api/courses/cs249/assignments/m12")
        assert course.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 1\n").status_code == 202
        assert other.upload("bob", SUBMISSIONS / "x.py", content=SOURCE + b"# 2\n").status_code == 202
        for where in (course, other):  # each assignment has room; the service has none
            full = where.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 3\n")
            assert full.status_code == 503 and full.headers["retry-after"] == "60", full.text
            assert "2 uploads waiting already" in full.json()["detail"]


# ---- waiting connections ----------------------------------------------------------------------------


def test_event_streams_and_long_polls_are_capped_per_student(settings: ServiceSettings) -> None:
    with parked_service(replace(settings, streams_per_student=2)) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        waiting = client.app.state.waiting  # type: ignore[attr-defined]
        with client.stream("GET", f"/api/submissions/{sid}/events", headers=course.students["alice"]) as one, \
             client.stream("GET", f"/api/submissions/{sid}/events", headers=course.students["alice"]) as two:
            assert one.status_code == two.status_code == 200
            assert waiting.count() == 2
            third = client.get(f"/api/submissions/{sid}/events", headers=course.students["alice"])
            assert third.status_code == 429 and third.headers["retry-after"] == "15"
            assert "live status connections open already" in third.json()["detail"]
            poll = client.get(f"/api/submissions/{sid}", params={"wait": 30}, headers=course.students["alice"])
            assert poll.status_code == 429
            assert client.get(f"/api/submissions/{sid}", headers=course.students["alice"]).status_code == 200
            assert client.get(f"/api/submissions/{sid}", params={"wait": 0.1},
                              headers=course.staff).status_code == 200  # another person
        deadline = time.monotonic() + 30
        while waiting.count() and time.monotonic() < deadline:  # closed streams give their places back
            time.sleep(0.05)
        assert waiting.count() == 0
        assert client.get(f"/api/submissions/{sid}", params={"wait": 0.1},
                          headers=course.students["alice"]).status_code == 200


def test_the_process_caps_its_waiting_connections_below_its_open_file_limit(settings: ServiceSettings) -> None:
    with parked_service(replace(settings, streams_total=2)) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        bob = course.upload("bob", SUBMISSIONS / "correct_source.py").json()["id"]
        with client.stream("GET", f"/api/submissions/{sid}/events", headers=course.students["alice"]) as one, \
             client.stream("GET", f"/api/submissions/{sid}/events", headers=course.students["alice"]) as two:
            assert one.status_code == two.status_code == 200
            full = client.get(f"/api/submissions/{bob}/events", headers=course.students["bob"])  # another person
            assert full.status_code == 503 and full.headers["retry-after"] == "15"
            assert "reload the page in a little while" in full.json()["detail"]
            assert client.get("/healthz").status_code == 200
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    try:  # was: 1,000 streams allowed under the common 1,024 open files: /healthz and SQLite starved
        said: list[str] = []
        app = create_app(replace(settings, streams_total=1000), announce=said.append)
        assert app.state.waiting.total == 128
        assert any("GRADER_STREAMS_TOTAL 1000 lowered to 128" in line for line in said), said
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_a_long_poll_reads_the_store_only_as_a_slow_fallback(parked: tuple[TestClient, str]) -> None:
    client, token = parked
    course = make_course(client, token)
    sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
    with counted_reads(client.app.state.db.engine, own_read) as reads:  # type: ignore[attr-defined]
        view = client.get(f"/api/submissions/{sid}", params={"wait": 4}, headers=course.students["alice"]).json()
    assert view["status"] == "queued"
    assert len(reads) <= 3  # at the start and at the end (re-reading each second: 5)


def test_a_long_poll_is_woken_by_the_finished_grading(settings: ServiceSettings) -> None:
    from grader.results.tables import Submission

    with parked_service(replace(settings, poll_interval_s=600)) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        app: Any = client.app
        with ThreadPoolExecutor(1) as pool:
            started = time.monotonic()
            poll = pool.submit(client.get, f"/api/submissions/{sid}", params={"wait": 120},
                               headers=course.students["alice"])
            time.sleep(1)

            def graded(s: Any, sid: str = sid) -> None:
                s.get_one(Submission, sid).status = "graded"

            app.state.db.run(graded)
            app.state.waiters.notify(sid, "ended")  # what the grading pool (or the Redis announcement) does
            view = poll.result(timeout=120).json()
        assert view["status"] == "graded" and time.monotonic() - started < 60  # woken, not at the end of its wait


def test_a_long_poll_told_the_final_status_answers_without_reading_the_store_again(
        settings: ServiceSettings) -> None:
    """The grading's announcement carries the final status its commit gave: the waiting long poll
    answers with it (one store read in all, its first); one told for another generation is not
    taken for it (the poll reads the store again, and waits on)."""
    from grader.results.tables import Submission
    from grader.service.views import status_view

    with parked_service(replace(settings, poll_interval_s=600)) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        app: Any = client.app

        def set_status(status: str) -> dict[str, Any]:
            def work(s: Any) -> dict[str, Any]:
                sub = s.get_one(Submission, sid)
                sub.status = status
                s.flush()
                return status_view(sub)
            return app.state.db.run(work)  # type: ignore[no-any-return]

        final = set_status("graded")
        set_status("queued")
        with counted_reads(app.state.db.engine, own_read) as reads, ThreadPoolExecutor(1) as pool:
            def poll() -> Any:
                return pool.submit(client.get, f"/api/submissions/{sid}", params={"wait": 120},
                                   headers=course.students["alice"])

            told = poll()
            time.sleep(1)
            app.state.waiters.notify(sid, "ended", final)  # what the worker's announcement tells
            assert told.result(timeout=120).json() == final | {"queue_place": None}
            assert len(reads) == 1, reads  # its first read, none after the announcement

            reads.clear()
            waiting = poll()
            time.sleep(1)
            app.state.waiters.notify(sid, "ended", final | {"generation": final["generation"] + 1})
            time.sleep(1)
            assert not waiting.done() and len(reads) == 2, reads  # read again: still queued, waits on
            set_status("graded")
            app.state.waiters.notify(sid, "ended")
            assert waiting.result(timeout=120).json()["status"] == "graded"


def test_an_announcement_is_taken_only_for_a_final_status_of_its_own_submission() -> None:
    from grader.service.notify import parse

    view = {"id": "a" * 32, "status": "graded", "final": True, "generation": 2}
    told = json.dumps(view)
    assert parse(f"{'a' * 32} ended {told}".encode()) == ("a" * 32, "ended", view)
    assert parse(f"{'b' * 32} ended {told}".encode()) == ("b" * 32, "ended", None)  # another's
    assert parse(f"{'a' * 32} ended {json.dumps(view | {'final': False})}".encode())[2] is None
    assert parse(f"{'a' * 32} ended {json.dumps(view | {'generation': '2'})}".encode())[2] is None
    assert parse(f"{'a' * 32} ended {{not json".encode()) == ("a" * 32, "ended", None)
    assert parse(f"{'a' * 32} ended {json.dumps(view | {'pad': 'x' * 5000})}".encode())[2] is None  # too long
    assert parse(f"{'a' * 32} started {told}".encode()) == ("a" * 32, "started", None)
    assert parse(b"abc") == ("abc", None, None)  # an older worker's: the id alone


def test_a_grading_that_starts_moves_the_queue_places_of_the_assignments_event_streams(
        settings: ServiceSettings) -> None:
    """Bob's upload waits behind Alice's. When hers starts grading, his stream says place 1 at once
    (the announcement wakes the same assignment's queued streams), not at its next re-read (15 s)."""
    from grader.results.tables import Submission

    with parked_service(replace(settings, poll_interval_s=600)) as (client, token):
        course = make_course(client, token)
        first = course.upload("alice", SUBMISSIONS / "x.py", content=SOURCE + b"# 1\n").json()["id"]
        second = course.upload("bob", SUBMISSIONS / "x.py", content=SOURCE + b"# 2\n").json()["id"]
        app: Any = client.app
        places: list[int | None] = []
        with client.stream("GET", f"/api/submissions/{second}/events", headers=course.students["bob"]) as events:
            lines = events.iter_lines()
            for line in lines:
                if line.startswith("data: "):
                    places.append(json.loads(line.removeprefix("data: "))["queue_place"])
                    if len(places) == 1:
                        time.sleep(0.5)  # the stream is waiting now

                        def started(s: Any) -> None:
                            s.get_one(Submission, first).status = "grading"

                        app.state.db.run(started)
                        woken = time.monotonic()
                        app.state.waiters.notify(first, "started")  # what the graders' announcement does
                    else:
                        break
        assert places == [2, 1]
        assert time.monotonic() - woken < 8  # woken, not at the stream's next re-read


def test_waiting_long_polls_share_one_store_read_per_interval(settings: ServiceSettings) -> None:
    """Two long polls on two queued uploads, with the slow fallback every 0.5 s: each interval
    reads both statuses in one query (not one per waiter), and a change no announcement told still
    ends a wait."""
    with parked_service(replace(settings, poll_interval_s=0.5)) as (client, token):
        views, reads = _two_long_polls(client, token)
    assert [v["status"] for v in views] == ["graded", "queued"]
    per_waiter = [r for r in reads if "submissions.id = " in r]  # one submission: a waiter's own read
    shared = [r for r in reads if "submissions.id IN" in r]
    assert len(per_waiter) <= 2 * 2 + 1  # each poll reads at its start and at its end (alice's: once woken)
    assert 3 <= len(shared) <= 12  # one read for both each 0.5 s, over about 4 s


def test_a_status_read_signs_in_within_its_own_transaction_and_a_refused_poll_leaves_no_waiter(
        settings: ServiceSettings) -> None:
    """A status read, at once or as a long poll, is one transaction of the store with the token's
    look-up in it, not two; a long poll with an unknown token, or on someone else's upload, is
    refused (401, 404) and leaves nothing waiting."""
    with parked_service(settings) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        app: Any = client.app
        begun: list[str] = []

        def begin(_conn: Any) -> None:
            if threading.current_thread() is not threading.main_thread():
                begun.append(threading.current_thread().name)

        event.listen(app.state.db.engine, "begin", begin)
        try:
            assert client.get(f"/api/submissions/{sid}", headers=course.students["alice"]).json()["status"] == "queued"
            at_once = len(begun)
            refused = [client.get(f"/api/submissions/{sid}", params={"wait": 30}, headers=headers).status_code
                       for headers in ({"Authorization": "Bearer student_unknown"}, course.students["bob"])]
        finally:
            event.remove(app.state.db.engine, "begin", begin)
        assert at_once == 1
        assert refused == [401, 404]
        assert app.state.waiters._events == {}


def test_a_long_poll_sleeps_through_the_start_of_its_grading(settings: ServiceSettings) -> None:
    """A long poll wants the final status: neither the announcement that the grading started nor
    the fallback re-read that finds it grading makes it read its submission again. Only the end does."""
    from grader.results.tables import Submission

    with parked_service(replace(settings, poll_interval_s=0.3)) as (client, token):
        course = make_course(client, token)
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        app: Any = client.app

        def status(value: str) -> Any:
            def write(s: Any) -> None:
                s.get_one(Submission, sid).status = value
            return write

        def polls_read(statement: str) -> bool:  # not this test's own writes, made on the main thread
            return own_read(statement) and threading.current_thread() is not threading.main_thread()

        with counted_reads(app.state.db.engine, polls_read) as own_reads, ThreadPoolExecutor(1) as pool:
            poll = pool.submit(client.get, f"/api/submissions/{sid}", params={"wait": 120},
                               headers=course.students["alice"])
            deadline = time.monotonic() + 60
            while not own_reads and time.monotonic() < deadline:  # the poll has read and waits
                time.sleep(0.05)
            time.sleep(0.5)
            app.state.db.run(status("grading"))
            app.state.waiters.notify(sid, "started")  # what the graders announce
            time.sleep(1.5)  # the fallback re-reads every 0.3 s meanwhile: it finds "grading"
            during = len(own_reads)
            app.state.db.run(status("graded"))
            app.state.waiters.notify(sid, "ended")
            view = poll.result(timeout=120).json()
    assert view["status"] == "graded"
    assert during == 1, own_reads[:during]  # its first read only, until the grading ended


def _two_long_polls(client: TestClient, token: str) -> tuple[list[dict[str, Any]], list[str]]:
    from grader.results.tables import Submission

    course = make_course(client, token)
    app: Any = client.app
    ids = [course.upload(who, SUBMISSIONS / "x.py", content=SOURCE + f"# {who}\n".encode()).json()["id"]
           for who in ("alice", "bob")]
    with counted_reads(app.state.db.engine, lambda s: "FROM submissions" in s and "count(" not in s) as reads, \
            ThreadPoolExecutor(2) as pool:
        polls = [pool.submit(client.get, f"/api/submissions/{sid}", params={"wait": 4},
                             headers=course.students[who]) for sid, who in zip(ids, ("alice", "bob"), strict=True)]
        time.sleep(2.5)

        def graded(s: Any) -> None:
            s.get_one(Submission, ids[0]).status = "graded"

        app.state.db.run(graded)  # told to nobody: the fallback read finds it
        views = [p.result(timeout=60).json() for p in polls]
    return views, reads


def test_the_embedded_graders_tell_the_waiters_when_a_grading_starts(settings: ServiceSettings) -> None:
    """The in-process pool wakes a submission's waiters twice: once its ``grading`` status is in the
    store, and once its result is."""
    from grader.results.tables import Submission

    printed: list[str] = []
    app: Any = create_app(settings, announce=printed.append)
    told: list[tuple[str, str, str, str | None]] = []
    real = app.state.waiters.notify

    def spy(sid: str, change: str, view: Any = None) -> None:  # the pool's thread: what a waiter would read
        told.append((sid, change, app.state.db.run(lambda s: s.get_one(Submission, sid).status),
                     view and view["status"]))
        real(sid, change, view)

    app.state.waiters.notify = spy
    with TestClient(app) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        sid = course.upload("alice", SUBMISSIONS / "correct_source.py").json()["id"]
        assert course.wait(sid, "alice")["status"] == "graded"
        deadline = time.monotonic() + 10
        while len(told) < 2 and time.monotonic() < deadline:  # the pool tells after its commit
            time.sleep(0.05)
    assert told == [(sid, "started", "grading", None), (sid, "ended", "graded", "graded")]  # the final view told


def test_an_event_stream_says_grading_as_soon_as_it_starts(settings: ServiceSettings, tmp_path: Path) -> None:
    """Bob's slow upload holds the one grader; Alice's waits behind it. Her stream says "grading"
    the moment the grader takes hers, not at its next re-read of the store (15 s later, by which
    time hers is graded: the stream would never have said "grading")."""
    from datetime import UTC, datetime

    from grader.results.tables import Submission
    from tests.service.conftest import slow_notebook

    printed: list[str] = []
    with TestClient(create_app(replace(settings, workers=1, poll_interval_s=600), announce=printed.append)) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        first = course.upload("bob", slow_notebook(tmp_path, 2, "first")).json()["id"]
        second = course.upload("alice", slow_notebook(tmp_path, 3, "second")).json()["id"]
        seen: list[tuple[str, datetime]] = []
        with client.stream("GET", f"/api/submissions/{second}/events", headers=course.students["alice"]) as events:
            for line in events.iter_lines():
                if line.startswith("data: "):
                    view = json.loads(line.removeprefix("data: "))
                    seen.append((view["status"], datetime.now(UTC)))
                    if view["final"]:
                        break
        started = client.app.state.db.run(  # type: ignore[attr-defined]
            lambda s: s.get_one(Submission, second).started_at)
        assert course.wait(first, "bob")["status"] == "graded"
    statuses = [status for status, _ in seen]
    assert statuses[0] == "queued" and statuses[-1] == "graded", statuses
    assert "grading" in statuses, f"the stream never said the grading started: {statuses}"
    said = next(at for status, at in seen if status == "grading")
    assert (said - started.replace(tzinfo=UTC)).total_seconds() < 3, (said, started)


@pytest.mark.redis
def test_a_worker_announces_when_a_grading_starts_and_when_it_ends(redis_server: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``grader worker``'s task announces on the broker once its ``grading`` status is committed and
    once its result is: an API's subscriber hears both (and wakes its waiters with each)."""
    from grader.service import tasks
    from grader.service.notify import Subscriber, announce

    heard: list[tuple[str, str | None, Any]] = []
    subscriber = Subscriber(redis_server.url, lambda sid, change, view: heard.append((sid, change, view)))
    subscriber.start()
    try:
        deadline = time.monotonic() + 30
        while ("ready", "ended", None) not in heard and time.monotonic() < deadline:  # heard once subscribed
            announce(redis_server.url, "ready", "ended")
            time.sleep(0.1)
        assert ("ready", "ended", None) in heard
        sid, steps = "a" * 32, []
        final = {"id": sid, "status": "graded", "final": True, "generation": 1, "finished_at": "2026-12-03T10:00:00Z"}

        def run_job(_db: Any, submission_id: str, _generation: int, *, on_started: Any = None,
                    on_stored: Any = None, **_: Any) -> str:
            steps.append("claimed")
            on_started(submission_id)  # what the real run_job does once its claim is committed
            steps.append("graded")
            on_stored(final)  # and once its result is, with the status view the commit gave
            return "graded"

        monkeypatch.setattr(tasks, "run_job", run_job)
        monkeypatch.setattr(tasks._State, "db", object())
        worker = ServiceSettings(broker=redis_server.url, hostname="w@test")
        monkeypatch.setattr(tasks._State, "settings", worker)
        heard.clear()
        assert tasks.register_task(tasks.make_celery(worker)).run(sid, 1) == "graded"
        while len(heard) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert steps == ["claimed", "graded"] and heard == [(sid, "started", None), (sid, "ended", final)], heard
    finally:
        subscriber.stop()


@pytest.mark.redis
def test_the_scaled_dispatcher_hands_a_job_to_the_broker_itself(redis_server: Any) -> None:
    """``CeleryDispatcher.enqueue`` puts the job in the broker and says so, from any thread (the
    API's pool): a job it failed to send would still be graded, by the sweeper, seconds later,
    so only the broker's contents tell."""
    from grader.service.dispatch import CeleryDispatcher

    dispatcher = CeleryDispatcher(ServiceSettings(broker=redis_server.url))
    dispatcher._redis().flushall()  # no other test's jobs (no worker runs meanwhile)
    try:
        ids = [f"{n:032x}" for n in range(1, 4)]
        with ThreadPoolExecutor(3) as pool:
            sent = list(pool.map(lambda sid: dispatcher.enqueue(sid, 1), ids))
        assert sent == [True, True, True]
        assert {(sid, 1) for sid in ids} <= (dispatcher.held() or set())
        assert dispatcher.depth() == 3
    finally:
        dispatcher._redis().flushall()
        dispatcher.close()


# ---- request bodies ----------------------------------------------------------------------------------


def _asgi(client: TestClient, method: str, path: str, headers: dict[str, str], chunk: bytes, chunks: int,
          first: bytes = b"") -> tuple[int, int]:
    """Send a body of ``chunks`` chunks to the app as a server streams it; (status, chunks it read)."""
    pulled = 0

    async def call() -> int:
        nonlocal pulled
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            nonlocal pulled
            if pulled < chunks:
                pulled += 1
                return {"type": "http.request", "body": (first if pulled == 1 else b"") + chunk,
                        "more_body": pulled < chunks}
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        raw = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(b"host", b"testserver"), *raw], "client": ("127.0.0.1", 1), "server": ("testserver", 80)}
        await client.app(scope, receive, send)  # type: ignore[arg-type]
        return status[0]

    assert client.portal is not None
    return client.portal.call(call), pulled


def test_a_chunked_upload_is_cut_off_at_its_cap_with_413(course: Course) -> None:
    chunk = b"x" * 2**16
    headers = course.students["alice"] | {"content-type": "multipart/form-data; boundary=abc",
                                          "transfer-encoding": "chunked"}
    part = (b'--abc\r\nContent-Disposition: form-data; name="file"; filename="a.ipynb"\r\n'
            b"Content-Type: application/octet-stream\r\n\r\n")
    status, pulled = _asgi(course.client, "POST", f"{course.base}/submissions", headers, chunk, 400, part)  # 25 MiB
    assert status == 413
    assert pulled * len(chunk) <= 5 * 2**20 + 2 * 2**16 + len(chunk)  # the cap, then one chunk more at most


def test_a_chunked_json_body_without_a_token_is_not_read(course: Course) -> None:
    status, pulled = _asgi(course.client, "POST", "/api/courses", {"content-type": "application/json",
                                                                    "transfer-encoding": "chunked"}, b" " * 2**16, 100)
    assert (status, pulled) == (401, 0)
    status, pulled = _asgi(course.client, "POST", "/api/courses", {"authorization": "Bearer staff_guessed",
                                                                    "transfer-encoding": "chunked"}, b" " * 2**16, 100)
    assert (status, pulled) == (401, 0)
    status, pulled = _asgi(course.client, "POST", "/api/courses", course.staff | {
        "content-type": "application/json", "transfer-encoding": "chunked"}, b" " * 2**16, 100)
    assert status == 413 and pulled <= 17  # 1 MiB: the cap of a JSON body


@pytest.mark.parametrize("path", ["/staff/courses/cs249/roster", "/c/cs249/m11/upload", "/staff/courses"])
def test_a_signed_in_pages_form_without_a_session_cookie_is_not_read(course: Course, path: str) -> None:
    """Was: spooled up to the route's cap (20 MiB for a roster) before the session was checked."""
    status, pulled = _asgi(course.client, "POST", path, {"content-type": "multipart/form-data; boundary=x",
                                                         "transfer-encoding": "chunked"}, b" " * 2**16, 100)
    assert (status, pulled) == (401, 0)


@pytest.mark.parametrize("path", ["/api/courses", "/api/courses/cs249/roster", "/signin", "/lti/launch",
                                  "/api/courses/cs249/assignments/m11/submissions", "/c/cs249/m11/upload"])
def test_a_declared_length_over_the_cap_is_413_before_anything_is_read(course: Course, path: str) -> None:
    status, pulled = _asgi(course.client, "POST", path, course.staff | {"content-length": str(300 * 2**20),
                                                                        "content-type": "application/json"},
                           b" " * 2**16, 10)
    assert (status, pulled) == (413, 0)


def test_a_staff_upload_for_a_student_still_works(course: Course) -> None:
    r = course.client.post(f"{course.base}/submissions", headers=course.staff, data={"student_id": "bob"},
                           files={"file": ("s.py", SOURCE, "application/octet-stream")})
    assert r.status_code == 202, r.text


# ---- over real HTTP ----------------------------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path) -> Iterator[int]:
    port = free_port()
    env = os.environ | {"GRADER_NO_DAEMON": "1", "GRADER_HEADER_TIMEOUT_S": "2"}
    with (tmp_path / "serve.log").open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "grader.cli", "serve", "--data", str(tmp_path / "data"),
                                 "--port", str(port)], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env)
    try:
        wait_port(port, 60)
        yield port
    finally:
        stop_pid(proc)


def _answer(sock: socket.socket) -> bytes:
    sock.settimeout(60)
    got = b""
    while b"\r\n\r\n" not in got:
        part = sock.recv(65536)
        if not part:
            break
        got += part
    return got


@pytest.mark.slow
def test_over_http_a_huge_body_is_refused_on_its_length_and_idle_sockets_are_closed(served: int) -> None:
    with socket.create_connection(("127.0.0.1", served)) as sock:
        sock.sendall(b"POST /api/courses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 314572800\r\n\r\n{")
        assert _answer(sock).startswith(b"HTTP/1.1 413 ")
    with socket.create_connection(("127.0.0.1", served)) as sock:  # sends nothing at all
        sock.settimeout(60)
        assert sock.recv(1) == b""  # closed by the server (after 2 s here)
    with socket.create_connection(("127.0.0.1", served)) as sock:  # a request head that never ends
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        sock.settimeout(60)
        assert sock.recv(1) == b""
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=60) as http:
        assert http.get("/healthz").status_code == 200  # an ordinary request is unaffected
        time.sleep(1.5)
        assert http.get("/healthz").status_code == 200  # a kept-alive connection, or a new one


def _refused_or_cut(sock: socket.socket, data: bytes) -> bytes:
    """Send ``data``; the status line the server answered with, or b"" if it cut the connection."""
    try:
        sock.sendall(data)
        return _answer(sock).split(b"\r\n", 1)[0]
    except (BrokenPipeError, ConnectionResetError):
        return b""


@pytest.mark.slow
def test_over_http_a_huge_request_head_is_refused_before_it_is_read_whole(served: int) -> None:
    """Was (httptools has no head limit): a 66 MiB header line was buffered whole and answered 200."""
    with socket.create_connection(("127.0.0.1", served)) as sock:
        status = _refused_or_cut(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (8 << 20) + b"\r\n\r\n")
        assert status in (b"HTTP/1.1 431 Request Header Fields Too Large", b""), status
    with socket.create_connection(("127.0.0.1", served)) as sock:  # many ordinary-sized header lines
        lines = b"".join(b"X-H%d: %s\r\n" % (i, b"b" * 1000) for i in range(2000))
        status = _refused_or_cut(sock, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n")
        assert status in (b"HTTP/1.1 431 Request Header Fields Too Large", b""), status
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=60) as http:
        # a large head within the cap (cookies, say) and a body far larger than it, in one write
        big = http.post("/api/courses", headers={"X-Padding": "c" * 30_000}, content=b"{" * 500_000)
        assert big.status_code in (401, 413), big.text
        assert http.get("/healthz", headers={"X-Padding": "c" * 30_000}).status_code == 200


@pytest.mark.slow
def test_over_http_a_body_trickled_a_byte_at_a_time_is_cut_off(served: int) -> None:
    """Was: a 1,000-byte body sent a byte every 8 s held its connection for as long as it liked."""
    for path in (b"/signin", b"/lti/launch"):
        with socket.create_connection(("127.0.0.1", served)) as sock:
            sock.sendall(b"POST " + path + b" HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded"
                         b"\r\nContent-Length: 1000\r\n\r\na")
            answer = _answer(sock)  # GRADER_HEADER_TIMEOUT_S is 2 here: under 2 KiB in 2 s is too slow
            assert answer.startswith(b"HTTP/1.1 408 "), answer
            assert sock.recv(1) == b""
    with httpx.Client(base_url=f"http://127.0.0.1:{served}", timeout=60) as http:
        def paced() -> Iterator[bytes]:  # 20 KiB over 2 s: slow, but ten times the least pace
            for _ in range(20):
                yield b"token=" + b"x" * 1018
                time.sleep(0.1)
        signin = http.post("/signin", content=paced(), headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert signin.status_code != 408 and signin.status_code < 500, signin.text
