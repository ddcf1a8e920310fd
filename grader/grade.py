"""The pipeline: load → extract → plan → (sandbox ∥ reference) → channel → judge → score."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from . import __version__
from .channel import CheckOutput, ErrorInfo, ImportRecord, read_check, read_import
from .errors import GraderError, SubmissionError
from .extract import duplicate_definitions, extract
from .judge import judge, not_gradable
from .load import LoadLimits, load_submission
from .models import CheckResult, ExtractionSummary, GradeReport, StudentModule
from .paths import expected_cache_dir
from .plan import Job, plan, submission_seed
from .reference import ReferenceOracle
from .rubric import CheckSpec, Rubric, load_rubric
from .sandbox import RunResult, Sandbox, Startable, make_sandbox
from .score import total


class Grader:
    """Grades submissions against one rubric on one sandbox backend."""

    def __init__(
        self,
        rubric: Rubric | str | Path | None = None,
        backend: str | Sandbox = "local",
        *,
        public_only: bool = False,
        seed: int | None = None,
        limits: LoadLimits = LoadLimits(),
        reference: ReferenceOracle | None = None,
        official: bool = False,
    ) -> None:
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        # A Grader closes only what it made; a sandbox or reference worker passed in stays open.
        self._owns_sandbox, self._owns_reference = isinstance(backend, str), reference is None
        self.sandbox = make_sandbox(backend, official) if isinstance(backend, str) else backend
        self.reference = reference or ReferenceOracle(self.rubric.module)
        self.public_only, self.seed, self.limits = public_only, seed, limits
        expected_cache_dir().mkdir(parents=True, exist_ok=True)  # exists before any sandbox, so it is hidden

    def start(self) -> None:
        """Warm up the sandbox and the reference worker before the first ``grade``."""
        if isinstance(self.sandbox, Startable):
            self.sandbox.start()
        self.reference.start()

    def grade_many(self, paths: Sequence[str | Path]) -> Iterator[tuple[Path, GradeReport | GraderError]]:
        """Grade in order; a file that cannot be read yields its SubmissionError instead of a report."""
        for path in paths:
            try:
                yield Path(path), self.grade(path)
            except SubmissionError as e:
                yield Path(path), e

    def close(self) -> None:
        if isinstance(self.sandbox, Startable) and self._owns_sandbox:
            self.sandbox.close()
        if self._owns_reference:
            self.reference.close()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grade(self, path: str | Path) -> GradeReport:
        """Grade one file; SubmissionError if it cannot be read at all."""
        submission = load_submission(path, self.limits)
        module = extract(submission, self.rubric.targets)
        seed = self.seed if self.seed is not None else submission_seed(submission.sha256)
        checks = self.rubric.select(self.public_only)
        blocked = _blocked(module, checks)
        runnable = tuple(c for c in checks if c.id not in blocked)
        job = plan(self.rubric, runnable, seed)
        results = dict(blocked)
        import_errors: tuple[str, ...] = ()
        backend = self.sandbox.info()
        if runnable:
            ran, import_errors, isolation = self._run(job, module, runnable)
            results.update(ran)
            if isolation is not None:  # only what this run's self-test verified
                backend = self.sandbox.info().model_copy(update={"isolation": isolation})
        ordered = tuple(results[c.id] for c in checks)
        score, max_score = total(ordered)
        return GradeReport(
            submission=submission.file_name, sha256=submission.sha256, rubric_id=self.rubric.id,
            rubric_hash=self.rubric.sha256, grader_version=__version__, seed=seed,
            backend=backend,
            extraction=ExtractionSummary(kept=module.kept, dropped=module.dropped,
                                         syntax_errors=module.syntax_errors, import_errors=import_errors),
            checks=ordered, score=score, max_score=max_score,
        )

    def _run(
        self, job: Job, module: StudentModule, checks: Sequence[CheckSpec]
    ) -> tuple[dict[str, CheckResult], tuple[str, ...], tuple[str, ...] | None]:
        student_dir = Path(tempfile.mkdtemp(prefix="grader-"))
        try:
            ref: dict[str, dict[str, CheckOutput]] = {}
            failure: list[BaseException] = []

            def compute_expected() -> None:
                try:
                    ref["expected"] = self.reference.expected(job)
                except BaseException as e:  # re-raised in the calling thread below
                    failure.append(e)

            worker = threading.Thread(target=compute_expected)
            worker.start()
            run = self.sandbox.run(job, module.chunks, student_dir, hide=(expected_cache_dir(),))
            worker.join()
            if failure:
                raise failure[0]
            expected = ref["expected"]
            imported = read_import(run.out_dir)
            results = {}
            for spec, planned in zip(checks, job.checks, strict=True):
                inputs = planned.decoded()
                called = _describe(self.rubric, spec, inputs)
                failed_def = _definition_failure(spec, imported, run)
                if failed_def is not None:
                    results[spec.id] = judge(spec, called, inputs, failed_def, expected[spec.id])
                    continue
                shapes = {k: v.shape for k, v in expected[spec.id].arrays.items()}
                got = _explain_name_error(read_check(run.out_dir, spec.id, shapes), imported)
                if got.outcome == "missing" and run.killed:
                    got = CheckOutput(outcome="timeout", note=run.killed)
                results[spec.id] = judge(spec, called, inputs, got, expected[spec.id])
            import_errors = tuple(f"cell {e.cell}, line {e.line}: {e.error.text()}"
                                  for e in (imported.chunk_errors if imported else ()))
            return results, import_errors, run.isolation
        finally:
            shutil.rmtree(student_dir, ignore_errors=True)


def grade(path: str | Path, **options: object) -> GradeReport:
    """Grade one submission with the default rubric: ``grader.grade("student.ipynb")``."""
    return Grader(**options).grade(path)  # type: ignore[arg-type]


def _describe(rubric: Rubric, spec: CheckSpec, inputs: dict[str, object]) -> str:
    from .harness.probes import load_probes

    return load_probes(rubric.module)[spec.probe].describe(inputs)


def _blocked(module: StudentModule, checks: Sequence[CheckSpec]) -> dict[str, CheckResult]:
    """Checks that cannot run because a target they need is missing or defined ambiguously."""
    dupes = duplicate_definitions(module)
    syntax = (f" (cell {', '.join(str(e.cell) for e in module.syntax_errors)} could not be parsed and may hold it)"
              if module.syntax_errors else "")
    blocked = {}
    for spec in checks:
        for name in spec.needs:
            if not module.target_cells.get(name):
                blocked[spec.id] = not_gradable(spec, f"{name} is not defined in any code cell{syntax}")
                break
            if name in dupes:
                cells = ", ".join(str(c) for c in dupes[name])
                blocked[spec.id] = not_gradable(
                    spec, f"{name} is defined differently in cells {cells}: keep only the one to be graded")
                break
    return blocked


def _definition_failure(spec: CheckSpec, imported: ImportRecord | None, run: RunResult) -> CheckOutput | None:
    """An outcome for checks whose target could not even be defined."""
    if imported is None:
        note = run.killed or "the sandbox stopped while importing the module (sys.exit or os._exit at top level?)"
        return CheckOutput(outcome="timeout" if run.killed else "crashed", note=note)
    for err in imported.chunk_errors:
        hit = [n for n in spec.needs if n in err.defines]
        if hit:
            return CheckOutput(outcome="error", error=_definition_error(hit[0], err.error))
    return None


def _definition_error(name: str, error: ErrorInfo) -> ErrorInfo:
    detail = f": {error.message}" if error.message else ""
    if error.type == "NotImplementedError":
        detail += " (the starter's raise NotImplementedError() is still there: finish it)"
    return error.model_copy(update={"message": f"defining {name} failed{detail}"})


def _explain_name_error(got: CheckOutput, imported: ImportRecord | None) -> CheckOutput:
    """A NameError for a name whose own definition failed points at that failure instead."""
    if got.outcome != "error" or got.error is None or got.error.type != "NameError" or imported is None:
        return got
    for err in imported.chunk_errors:
        for name in err.defines:
            if f"'{name}'" in got.error.message:
                note = f"{got.error.message}, because defining {name} failed in cell {err.cell}: {err.error.type}"
                return got.model_copy(update={"error": got.error.model_copy(update={"message": note[:900]})})
    return got
