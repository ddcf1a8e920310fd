"""The one store: Alembic migrations that match the tables, old batch stores adopted, and the
unique constraint that keeps exactly one result per grading request (SQLite and PostgreSQL)."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from grader.models import BackendInfo, ExtractionSummary, GradeReport
from grader.results.database import MIGRATIONS, Database, sqlite_url
from grader.results.schema import metadata
from grader.results.store import SQLiteStore
from grader.results.tables import HEAD_REVISION, Assignment, Grading, Student, utcnow
from grader.service import jobs, ops
from grader.service.schemas import AssignmentIn, CourseIn

OLD_SCHEMA = """
CREATE TABLE results (student_id TEXT PRIMARY KEY, cache_key TEXT NOT NULL, sha256 TEXT NOT NULL,
  file_name TEXT NOT NULL, name TEXT NOT NULL DEFAULT '', email TEXT NOT NULL DEFAULT '',
  submitted_at TEXT NOT NULL DEFAULT '', status TEXT NOT NULL CHECK (status IN ('graded', 'invalid', 'failed_to_grade')),
  reason TEXT NOT NULL DEFAULT '', score REAL, max_score REAL, report TEXT, graded_at TEXT NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO results VALUES ('jdoe', 'k', 'abc', 'jdoe.ipynb', 'J Doe', '', '', 'invalid', 'not JSON', NULL, NULL, NULL,
  '2026-01-01T00:00:00+00:00');
INSERT INTO meta VALUES ('layout', 'folder');
"""


def test_head_revision_is_the_newest_migration() -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    assert ScriptDirectory.from_config(config).get_current_head() == HEAD_REVISION


def _differences(db: Database) -> list[Any]:
    db.migrate()
    with db.engine.connect() as connection:
        return list(compare_metadata(MigrationContext.configure(connection, opts={"compare_type": True}), metadata))


def test_migrations_build_exactly_the_tables_on_sqlite(tmp_path: Path) -> None:
    db = Database(sqlite_url(tmp_path / "s.sqlite"))
    assert _differences(db) == []
    db.dispose()


@pytest.mark.postgres
def test_migrations_build_exactly_the_tables_on_postgresql(pg_url: str) -> None:
    db = Database(pg_url)
    assert _differences(db) == []
    db.dispose()


def _schema(path: Path) -> list[tuple[str, list[str]]]:
    """Each table's and index's definition, its clauses sorted (a migration that rebuilds a table
    on SQLite lists unnamed foreign keys in no fixed order)."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    return sorted((name, sorted(c.strip() for c in re.split(r",\s*\n|\n\)$", sql.rstrip()))) for name, sql in rows)


def test_a_new_batch_store_is_what_the_migrations_make_whether_or_not_it_was_copied(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first new store runs the migrations; the next ones are copies of an empty store cached
    then: the same schema, at the head revision, each with only its own rows."""
    from grader.settings import reload

    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))
    reload()
    migrated = Database(sqlite_url(tmp_path / "direct.sqlite"))
    migrated.migrate()
    migrated.dispose()
    with SQLiteStore(tmp_path / "first") as first:
        first.set_meta("layout", "folder")
    assert list((tmp_path / "cache" / "empty-stores").glob("*.sqlite"))
    with SQLiteStore(tmp_path / "second") as second:
        assert second.meta() == {}
    for store in ("first", "second"):
        path = tmp_path / store / SQLiteStore.FILE
        assert _schema(path) == _schema(tmp_path / "direct.sqlite")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(HEAD_REVISION,)]


def test_a_store_of_the_old_hand_written_batch_schema_is_adopted(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        conn.executescript(OLD_SCHEMA)
    with SQLiteStore(tmp_path) as store:
        (old,) = store.results()
        assert (old.student_id, old.status, old.reason) == ("jdoe", "invalid", "not JSON")
        assert store.meta() == {"layout": "folder"}
        assert store.key_of("jdoe") == "k"
    with sqlite3.connect(tmp_path / "results.sqlite") as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchone() == (HEAD_REVISION,)


def _submission(db: Database) -> tuple[str, int]:
    def work(s: Any) -> tuple[str, int]:
        course = ops.create_course(s, CourseIn(slug="c", title="C"), "t")
        assignment = ops.create_assignment(s, course, AssignmentIn(slug="a"), "t")
        student = Student(course_id=course.id, student_id="s1", token_hash="0" * 64)
        s.add(student)
        s.flush()
        sub = ops.submit(s, assignment, student, "x.py", b"print(1)\n").submission
        return sub.id, sub.generation

    db.migrate()
    return db.run(work)


def _report() -> GradeReport:
    return GradeReport(submission="x.py", sha256="0" * 64, rubric_id="r", rubric_hash="h", grader_version="0", seed=1,
                       backend=BackendInfo(name="local", label="official"),
                       extraction=ExtractionSummary(kept=(), dropped=(), syntax_errors=()), checks=(),
                       score=1.0, max_score=1.0)


def _race(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    sid, generation = _submission(db)
    barrier = threading.Barrier(2)

    def slow_grade(*_args: object, **_kw: object) -> GradeReport:
        barrier.wait(10)  # both workers claimed the job before either stores its result
        return _report()

    monkeypatch.setattr(jobs, "grade_file", slow_grade)
    outcomes: list[str] = []

    def worker(name: str) -> None:
        outcomes.append(jobs.run_job(db, sid, generation, worker=name, backend="local", official=True))

    threads = [threading.Thread(target=worker, args=(f"w{i}",)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert db.run(lambda s: len(s.scalars(select(Grading).where(Grading.submission_id == sid)).all())) == 1
    with pytest.raises(IntegrityError):  # and the database itself refuses a second result
        db.run(lambda s: s.add(Grading(submission_id=sid, generation=generation, status="graded", rubric_hash="h",
                                       requested_at=utcnow(), latency_s=0.0)))
    return sorted(outcomes)


def test_two_workers_racing_store_one_result_on_sqlite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(sqlite_url(tmp_path / "s.sqlite"))
    assert _race(db, monkeypatch) == ["duplicate", "graded"]
    db.dispose()


@pytest.mark.postgres
def test_two_workers_racing_store_one_result_on_postgresql(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    db = Database(pg_url)
    assert _race(db, monkeypatch) == ["duplicate", "graded"]
    db.dispose()


def _same_upload_twice_at_once(db: Database) -> set[str]:
    _submission(db)
    barrier = threading.Barrier(2)
    ids: list[str] = []

    def upload() -> None:
        def work(s: Any) -> str:
            assignment = s.scalar(select(Assignment))
            student = s.scalar(select(Student))
            barrier.wait(10)
            return ops.submit(s, assignment, student, "y.py", b"print(2)\n").submission.id

        ids.append(db.run(work))

    threads = [threading.Thread(target=upload) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(ids) == 2
    return set(ids)


def test_the_same_upload_twice_at_once_is_one_submission_on_sqlite(tmp_path: Path) -> None:
    db = Database(sqlite_url(tmp_path / "s.sqlite"))
    assert len(_same_upload_twice_at_once(db)) == 1
    db.dispose()


@pytest.mark.postgres
def test_the_same_upload_twice_at_once_is_one_submission_on_postgresql(pg_url: str) -> None:
    db = Database(pg_url)
    assert len(_same_upload_twice_at_once(db)) == 1
    db.dispose()


def test_gradescope_mode_and_exports_do_not_load_sqlalchemy() -> None:
    """Only opening a store needs SQLAlchemy: a Gradescope container grading one file does not."""
    code = ("import sys, grader.results.record, grader.results.store, grader.batch.runner, grader.export.base, "
            "grader.feedback.view, grader.gradescope_mode; "
            "sys.exit('sqlalchemy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
