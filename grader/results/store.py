"""The results store (``grader batch`` writes it): ``results.sqlite`` in RESULTS_DIR, written as each
submission finishes, through the same SQLAlchemy tables and Alembic migrations as the grading
service (``grader/results/tables.py``), so the batch cache, the service and the exports share one
store. A store written by older versions (the same tables, no Alembic bookkeeping) is adopted.

A result is keyed by (submission sha256, rubric hash, sandbox image, grader version), so a rerun
regrades only what changed, and a killed batch loses at most the submissions in flight.

A new store starts as a copy of an empty store that the migrations made once, kept in the
grader's cache under a hash of the migrations and the library versions that ran them: only the
first new store pays for Alembic (about 0.2 s).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import threading
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, cast

from ..models import GradeReport
from .record import UNREADABLE, ResultStatus, StoredResult

if TYPE_CHECKING:  # SQLAlchemy loads with the first store: StoredResult alone (Gradescope mode, exports) needs none
    from .database import Database


def _copy_empty_store(path: Path) -> None:
    """Make ``path`` a copy of the cached empty store at the migrations' head (made first if
    missing, by running them on a private file that is then renamed into place)."""
    import importlib.metadata

    from ..paths import cache_root
    from .database import MIGRATIONS, Database, sqlite_url

    h = hashlib.sha256()
    for name in ("sqlalchemy", "alembic"):
        h.update(f"{name}={importlib.metadata.version(name)}\0".encode())
    for f in sorted(MIGRATIONS.rglob("*.py")):
        h.update(f"{f.relative_to(MIGRATIONS).as_posix()}\0".encode() + f.read_bytes())
    template = cache_root() / "empty-stores" / f"{h.hexdigest()[:16]}.sqlite"
    if not template.is_file():
        template.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        made = template.with_name(f".{os.getpid()}-{threading.get_ident()}.sqlite")
        db = Database(sqlite_url(made))
        try:
            db.migrate()
        finally:
            db.dispose()  # the last connection's close folds the write-ahead log into the file
        os.replace(made, template)
    shutil.copyfile(template, path)


class SQLiteStore:
    """Thread-safe; every ``put`` is committed before it returns."""

    FILE = "results.sqlite"

    def __init__(self, results_dir: Path, *, readonly: bool = False) -> None:
        """``readonly``: read a store that this user may not write (a TA exporting a shared
        results folder); it must exist and be at the migrations' head."""
        from ..errors import GraderError
        from .database import Database, current_revision, sqlite_url
        from .tables import HEAD_REVISION

        self.path = results_dir / self.FILE
        self._lock = threading.Lock()
        self.readonly = readonly
        if readonly:
            self._db: Database = Database(sqlite_url(self.path, readonly=True))
            if current_revision(self._db.engine) != HEAD_REVISION:
                self._db.dispose()
                raise GraderError(f"{self.path} was written by another version of the grader and this user may not "
                                  "update it: run this command as a user who can write that folder (once)")
            return
        results_dir.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            _copy_empty_store(self.path)
        self._db = Database(sqlite_url(self.path))
        self._db.migrate()

    def close(self) -> None:
        with self._lock:
            self._db.dispose()

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def key_of(self, student_id: str) -> str | None:
        from sqlalchemy import select

        from .tables import BatchResult

        with self._lock, self._db.session() as session:
            return session.scalar(select(BatchResult.cache_key).where(BatchResult.student_id == student_id))

    def put(self, result: StoredResult) -> None:
        from sqlalchemy.dialects.sqlite import insert

        from .tables import BatchResult

        row = asdict(result) | {"report": result.report.model_dump_json() if result.report is not None else None}
        statement = insert(BatchResult).values(row)
        with self._lock, self._db.session() as session:
            session.execute(statement.on_conflict_do_update(index_elements=[BatchResult.student_id], set_=row))

    def results(self) -> Iterator[StoredResult]:
        """Every stored result, by student id. A row whose report cannot be read fails only that
        student (``failed_to_grade``, ``UNREADABLE``) and is graded again by the next batch."""
        from sqlalchemy import select, update

        from .tables import BatchResult

        with self._lock, self._db.session() as session:
            rows = session.scalars(select(BatchResult).order_by(BatchResult.student_id)).all()
        unreadable = []
        for r in rows:
            try:
                report = GradeReport.model_validate_json(r.report) if r.report else None
            except ValueError:  # written by another grader version, or damaged: this student only
                unreadable.append(r.student_id)
                yield StoredResult(r.student_id, "", r.sha256, r.file_name, r.name, r.email, r.submitted_at,
                                   "failed_to_grade", UNREADABLE, None, None, None, r.graded_at)
                continue
            yield StoredResult(r.student_id, r.cache_key, r.sha256, r.file_name, r.name, r.email, r.submitted_at,
                               cast(ResultStatus, r.status), r.reason, r.score, r.max_score, report, r.graded_at)
        if unreadable and not self.readonly:  # no longer up to date: the next batch grades them again
            with self._lock, self._db.session() as session:
                session.execute(update(BatchResult).where(BatchResult.student_id.in_(unreadable)).values(cache_key=""))

    def set_meta(self, key: str, value: str) -> None:
        from sqlalchemy.dialects.sqlite import insert

        from .tables import Meta

        statement = insert(Meta).values(key=key, value=value)
        with self._lock, self._db.session() as session:
            session.execute(statement.on_conflict_do_update(index_elements=[Meta.key], set_={"value": value}))

    def meta(self) -> dict[str, str]:
        from sqlalchemy import select

        from .tables import Meta

        with self._lock, self._db.session() as session:
            return {m.key: m.value for m in session.scalars(select(Meta))}
