"""The results store: one SQLite file in RESULTS_DIR, written as each submission finishes.

A result is keyed by (submission sha256, rubric hash, sandbox image, grader version), so a rerun
regrades only what changed, and a killed batch loses at most the submissions in flight.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from ..models import GradeReport, clean, map_strings, shown

ResultStatus = Literal["graded", "invalid", "failed_to_grade"]

SCHEMA = """
CREATE TABLE IF NOT EXISTS results (
  student_id   TEXT PRIMARY KEY,
  cache_key    TEXT NOT NULL,
  sha256       TEXT NOT NULL,
  file_name    TEXT NOT NULL,
  name         TEXT NOT NULL DEFAULT '',
  email        TEXT NOT NULL DEFAULT '',
  submitted_at TEXT NOT NULL DEFAULT '',
  status       TEXT NOT NULL CHECK (status IN ('graded', 'invalid', 'failed_to_grade')),
  reason       TEXT NOT NULL DEFAULT '',
  score        REAL,
  max_score    REAL,
  report       TEXT,
  graded_at    TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
"""


@dataclass(frozen=True)
class StoredResult:
    """One student's row; ``report`` is None unless the submission was graded."""

    student_id: str
    cache_key: str
    sha256: str
    file_name: str
    name: str
    email: str
    submitted_at: str
    status: ResultStatus
    reason: str
    score: float | None
    max_score: float | None
    report: GradeReport | None
    graded_at: str

    def __post_init__(self) -> None:
        # Ids, names, dates and reasons come from students' files, file names and metadata: each one
        # is made storable (UTF-8, SQLite, JSON, CSV) and printable here, once.
        for name in ("student_id", "file_name", "name", "email", "submitted_at", "reason"):
            object.__setattr__(self, name, shown(getattr(self, name)))
        if self.report is not None:
            object.__setattr__(self, "report", _storable(self.report))


def cache_key(sha256: str, rubric_hash: str, image: str, grader_version: str) -> str:
    return f"{sha256}:{rubric_hash[:16]}:{image}:{grader_version}"


class SQLiteStore:
    """Thread-safe; every ``put`` is committed before it returns."""

    FILE = "results.sqlite"

    def __init__(self, results_dir: Path) -> None:
        results_dir.mkdir(parents=True, exist_ok=True)
        self.path = results_dir / self.FILE
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def key_of(self, student_id: str) -> str | None:
        with self._lock:
            row = self._db.execute("SELECT cache_key FROM results WHERE student_id = ?", (student_id,)).fetchone()
        return row[0] if row else None

    def put(self, result: StoredResult) -> None:
        report = result.report.model_dump_json() if result.report is not None else None
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (result.student_id, result.cache_key, result.sha256, result.file_name, result.name, result.email,
                 result.submitted_at, result.status, result.reason, result.score, result.max_score, report,
                 result.graded_at),
            )

    def results(self) -> Iterator[StoredResult]:
        """Every stored result, by student id."""
        with self._lock:
            rows = self._db.execute("SELECT * FROM results ORDER BY student_id").fetchall()
        for (student_id, key, sha, file_name, name, email, submitted_at, status, reason, score, max_score,
             report, graded_at) in rows:
            yield StoredResult(student_id, key, sha, file_name, name, email, submitted_at, status, reason, score,
                               max_score, GradeReport.model_validate_json(report) if report else None, graded_at)

    def set_meta(self, key: str, value: str) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    def meta(self) -> dict[str, str]:
        with self._lock:
            return dict(self._db.execute("SELECT key, value FROM meta").fetchall())


def _storable(report: GradeReport) -> GradeReport:
    """``report``, or a copy whose strings every encoder accepts. Student text is made safe where it
    enters a report; should a lone surrogate still get in, it is escaped here, once, rather than
    stop the store, the report files and the exports of the whole class."""
    try:
        report.model_dump_json()
        return report
    except ValueError:  # pydantic's serialization error: not UTF-8
        return GradeReport.model_validate(map_strings(report.model_dump(), clean))


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
