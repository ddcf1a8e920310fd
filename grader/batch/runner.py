"""``grader batch``: grade a whole class in parallel, resumably, into RESULTS_DIR."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .. import __version__
from ..errors import GraderError, SubmissionError, os_reason
from ..load import LoadLimits
from ..models import shown
from ..results.names import shown_name
from ..results.record import StoredResult, cache_key, now
from ..results.roster import Roster
from ..results.store import SQLiteStore
from ..rubric import Rubric, load_rubric
from ..secret import folder_secret
from ..session import Session
from .identify import Keep, resolve
from .layouts import Discovery, Entry, discover


@dataclass
class BatchOutcome:
    layout: str
    total: int
    graded: int = 0
    skipped: int = 0
    invalid: int = 0
    failed: int = 0
    problems: list[str] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)  # the results folders written: one per course module

    def add(self, other: BatchOutcome) -> None:
        """Count another module's part of a mixed class in (its own results folder)."""
        self.graded, self.skipped = self.graded + other.graded, self.skipped + other.skipped
        self.invalid, self.failed = self.invalid + other.invalid, self.failed + other.failed
        self.folders.extend(other.folders)


Progress = Callable[[str, StoredResult | None], None]


def run_batch(
    source: Path,
    results_dir: Path,
    *,
    rubric: Path | None = None,
    module: str | None = None,
    backend: str = "local",
    workers: int | None = None,
    force: bool = False,
    roster: Roster | None = None,
    keep: Keep = "latest",
    release: dict[str, str] | None = None,
    on_start: Callable[[Discovery, int], None] | None = None,
    on_done: Progress | None = None,
    session: Session | None = None,
) -> BatchOutcome:
    """Grade every submission in ``source`` that has no up-to-date result in ``results_dir``.
    ``roster`` maps an LMS download's ids to the course's (grader/batch/identify.py); ``release``
    (due and publish dates, grader.visibility) is stored for the feedback pages and exports.

    One official session (one sandbox and one reference worker, shared by the workers) grades the
    batch; ``session`` is one the caller made and warmed early. This call closes it."""
    if session is None:
        session = Session(official=True)
        session.warm_in_background(backend, rubric)
    try:
        if workers is not None and workers < 1:
            raise GraderError(f"--workers {workers}: give 1 or more parallel sandboxes")
        from .. import modules
        from ..modules.choose import find_unit

        if rubric is None and module is not None:
            module = find_unit(module).name
        # several units and nothing chosen: the submissions say which module they are, once discovered
        loaded = (load_rubric(rubric, module=module) if rubric is not None or module is not None
                  or len(modules.installed()) <= 1 else None)
        return _discover_and_run(source, results_dir, loaded, session, backend, workers, force, roster, keep,
                                 release, on_start, on_done)
    finally:
        session.close()


def _discover_and_run(source: Path, results_dir: Path, loaded: Rubric | None, session: Session, backend: str,
                      workers: int | None, force: bool, roster: Roster | None, keep: Keep,
                      release: dict[str, str] | None, on_start: Callable[[Discovery, int], None] | None,
                      on_done: Progress | None) -> BatchOutcome:
    scratch = Path(tempfile.mkdtemp(prefix="grader-batch-"))
    try:
        found = discover(source, scratch)
        resolve(found, roster, keep)
        if not found.entries:
            why = f" ({'; '.join(found.problems)})" if found.problems else ""
            raise SubmissionError(f"{source}: no submission to grade in this {found.layout}{why}; give the folder or "
                                  ".zip that holds the students' notebooks")
        if loaded is not None:
            return _run_in(results_dir, found, loaded, session, backend, workers, force, keep, release, on_start,
                           on_done)
        groups = _batch_modules(found)
        if len(groups) == 1:  # one module: the results folder is the one given, as always
            return _run_in(results_dir, found, load_rubric(module=next(iter(groups))), session, backend, workers,
                           force, keep, release, on_start, on_done)
        # a mixed class: each module's submissions are graded with its own rubric into its own results
        # folder (one gradebook column, one export each), RESULTS_DIR/<module>/
        outcome = BatchOutcome(found.layout, len(found.entries), problems=list(found.problems))
        for name, part in sorted(groups.items()):
            outcome.add(_run_in(results_dir / name, part, load_rubric(module=name), session, backend, workers,
                                force, keep, release, on_start, on_done))
        return outcome
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _run_in(results_dir: Path, found: Discovery, loaded: Rubric, session: Session, backend: str,
            workers: int | None, force: bool, keep: Keep, release: dict[str, str] | None,
            on_start: Callable[[Discovery, int], None] | None, on_done: Progress | None) -> BatchOutcome:
    store = open_store(results_dir)
    try:
        seed_secret = folder_secret(results_dir)  # the course's, kept with its results (grader.secret)
        outcome = _run(found, store, loaded, session, backend, workers, force, keep, release or {}, on_start,
                       on_done, seed_secret)
    finally:
        store.close()
    outcome.folders = [results_dir]
    return outcome


def _batch_modules(found: Discovery) -> dict[str, Discovery]:
    """The batch's submissions by course module (grader.modules.choose): the one each notebook says;
    a notebook that says nothing goes with the others when they are of one module, and is a problem
    of the batch (not graded) when they are of several; none that can tell is the first one's error."""
    from ..modules.choose import choose_module

    chosen: dict[str, list[Entry]] = {}
    unknown: list[tuple[Entry, GraderError]] = []
    for entry in found.entries:
        try:
            name = choose_module(entry.path).name
        except GraderError as e:
            unknown.append((entry, e))
            continue
        chosen.setdefault(name, []).append(entry)
    if not chosen:
        raise unknown[0][1]  # entries is not empty
    if len(chosen) == 1:
        return {next(iter(chosen)): found}
    problems = [*found.problems, *(f"{e.student_id}: {err}" for e, err in unknown)]
    first = min(chosen)  # the batch's problems are told once, with the first module's part
    return {name: Discovery(found.layout, entries=entries, problems=problems if name == first else [],
                            ambiguous=list(found.ambiguous),
                            superseded=[s for s in found.superseded if s.student_id in {e.student_id for e in entries}])
            for name, entries in chosen.items()}


def open_store(results_dir: Path) -> SQLiteStore:
    """The results store of RESULTS_DIR; GraderError with the reason when that folder cannot hold it."""
    try:
        results_dir.mkdir(parents=True, exist_ok=True)
        if not os.access(results_dir, os.W_OK | os.X_OK):  # checked here, whatever database library opens the store
            raise PermissionError(13, "Permission denied", str(results_dir))
        return SQLiteStore(results_dir)
    except (OSError, sqlite3.Error) as e:
        reason = os_reason(e) if isinstance(e, OSError) else str(e)
        if results_dir.exists() and not results_dir.is_dir():
            reason = "it is a file, not a folder"
        raise GraderError(f"--out {results_dir}: results cannot be written there ({reason}); give a folder you can "
                          "write to") from None


def _run(found: Discovery, store: SQLiteStore, loaded: Rubric, session: Session, backend: str, workers: int | None,
         force: bool, keep: Keep, release: dict[str, str], on_start: Callable[[Discovery, int], None] | None,
         on_done: Progress | None, seed_secret: bytes) -> BatchOutcome:
    image = _image_id(session, backend)
    store.set_meta("rubric", loaded.model_dump_json())
    store.set_meta("layout", found.layout)
    store.set_meta("release", json.dumps(release))
    store.set_meta("lms_ids", json.dumps({e.student_id: {"lms": e.lms, "id": e.lms_id, "late": e.late}
                                          for e in found.entries if e.lms}))
    todo = []
    outcome = BatchOutcome(found.layout, len(found.entries), problems=list(found.problems))
    for entry in found.entries:
        key = cache_key(_sha256(entry.path), loaded.sha256, image, __version__)
        if not force and store.key_of(entry.student_id) == key:
            outcome.skipped += 1
        else:
            todo.append((entry, key))
    attempts = [(e, key) for e in (found.superseded if keep == "all" else [])
                if (key := cache_key(_sha256(e.path), loaded.sha256, image, __version__)) != _attempt_key(store, e)
                or force]
    if on_start is not None:
        on_start(found, len(todo))
    _grade_all(todo, attempts, loaded, session, backend, workers or os.cpu_count() or 1, store, outcome, on_done,
               seed_secret)
    return outcome


def _grade_all(todo: list[tuple[Entry, str]], attempts: list[tuple[Entry, str]], rubric: Rubric, session: Session,
               backend: str, workers: int, store: SQLiteStore, outcome: BatchOutcome, on_done: Progress | None,
               seed_secret: bytes) -> None:
    """Grade ``todo`` into the store, and ``attempts`` (older submissions, --keep all) into
    reports/attempts/ only: they do not count."""
    local = threading.local()
    # Submissions graded side by side already keep the cores busy: each runs its checks one at a
    # time then (a second runner process per submission would cost CPU, not save time).
    parallel = max(1, (os.cpu_count() or 1) // max(1, workers))

    def grade_one(entry: Entry, key: str) -> StoredResult:
        if not hasattr(local, "grader"):
            local.grader = session.grader(rubric, backend=backend, parallel=parallel, seed_secret=seed_secret)
        base = dict(student_id=entry.student_id, cache_key=key, sha256=key.split(":")[0],
                    file_name=shown_name(entry.path.name, 255), name=entry.name, email=entry.email,
                    submitted_at=entry.submitted_at)
        try:
            report = local.grader.grade(entry.path)
        except SubmissionError as e:
            return StoredResult(**base, status="invalid", reason=shown(str(e)), score=None, max_score=None, report=None,
                                graded_at=now())
        except GraderError as e:
            return StoredResult(**base, status="failed_to_grade", reason=shown(str(e)), score=None, max_score=None,
                                report=None, graded_at=now())
        except Exception as e:  # a grader bug must not stop the class; it is flagged, never scored 0
            reason = f"internal grader error, please report it: {type(e).__name__}: {shown(str(e)[:300])}"
            return StoredResult(**base, status="failed_to_grade", reason=reason, score=None, max_score=None,
                                report=None, graded_at=now())
        if entry.notes:  # which of several uploads was graded: the student's feedback says so too
            extraction = report.extraction.model_copy(update={"notes": report.extraction.notes + entry.notes})
            report = report.model_copy(update={"extraction": extraction})
        return StoredResult(**base, status="graded", reason="", score=report.score, max_score=report.max_score,
                            report=report, graded_at=now())

    with ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="grade") as pool:
        older = [pool.submit(grade_one, entry, key) for entry, key in attempts]
        futures = {pool.submit(grade_one, entry, key): entry for entry, key in todo}
        for attempt, (entry, _key) in zip(older, attempts, strict=True):
            write_attempt_report(store.path.parent, entry, attempt.result())
        for future in as_completed(futures):
            result = future.result()
            store.put(result)  # committed now: a kill after this line loses nothing
            write_student_report(store.path.parent, result)
            if result.status == "graded":
                outcome.graded += 1
            elif result.status == "invalid":
                outcome.invalid += 1
            else:
                outcome.failed += 1
            if on_done is not None:
                on_done(futures[future].student_id, result)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        h.update(f.read(LoadLimits().max_bytes + 1))
    return h.hexdigest()


def _image_id(session: Session, backend: str) -> str:
    if backend != "docker":
        return backend
    return session.sandbox("docker").info().image or "docker"


def _attempt_path(results_dir: Path, entry: Entry) -> Path:
    return results_dir / "reports" / "attempts" / entry.student_id / f"{entry.attempt or 'attempt'}.json"


def _attempt_key(store: SQLiteStore, entry: Entry) -> str | None:
    """The cache key an older attempt's report was graded under, if it is on disk."""
    try:
        key = json.loads(_attempt_path(store.path.parent, entry).read_text(encoding="utf-8")).get("cache_key")
    except (OSError, ValueError, AttributeError):
        return None
    return key if isinstance(key, str) else None


def write_attempt_report(results_dir: Path, entry: Entry, result: StoredResult) -> Path:
    """``reports/attempts/<student>/<attempt>.json``: an older submission's result (--keep all);
    graded again only when it, the rubric, the image or the grader changed."""
    path = _attempt_path(results_dir, entry)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = result.report.model_dump(mode="json") if result.report is not None else \
        {"status": result.status, "reason": result.reason}
    path.write_text(json.dumps({"file_name": result.file_name, "submitted_at": result.submitted_at,
                                "cache_key": result.cache_key, **data}, indent=2), encoding="utf-8")
    return path


def write_student_report(results_dir: Path, result: StoredResult) -> Path | None:
    """``reports/<student>.json``: the score report, for people and tools that want files."""
    if result.report is None:
        return None
    path = results_dir / "reports" / f"{result.student_id}.json"
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(result.report.model_dump_json(indent=2), encoding="utf-8")
    tmp.replace(path)
    return path
