"""The pipeline: load → extract → plan → (sandbox ∥ reference) → channel → judge → score."""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from . import __version__, modules, secret
from .channel import CheckOutput, read_check, read_import
from .errors import GraderError
from .intake import read_submission
from .judge import judge, outcomes, settle_pointers
from .judge.crash import Code
from .load import LoadLimits
from .models import CheckResult, ExtractionSummary, GradeReport, StudentCode, cell_labels, shown
from .paths import expected_cache_dir
from .plan import Job, plan, submission_seeds
from .reference import Oracle
from .rubric import CheckSpec, Rubric, load_rubric
from .sandbox import Sandbox, Startable
from .score import total

G = TypeVar("G", bound="Grader")


class Grader:
    """Grades submissions against one rubric on a sandbox and a reference worker it borrows.

    It makes neither: a ``Session`` (grader/session.py, the one door) does, and lends them through
    ``Session.grader``; ``grader.Grader`` (grader/standalone.py) is this grader with a session of
    its own. Closing a Grader closes nothing it borrowed."""

    def __init__(
        self,
        rubric: Rubric | str | Path | None,
        sandbox: Sandbox,
        reference: Oracle,
        *,
        public_only: bool = False,
        seed: int | None = None,
        limits: LoadLimits = LoadLimits(),
        official: bool = False,
        parallel: int | None = None,
        seed_secret: bytes | None = None,
    ) -> None:
        # the key of the hidden checks' inputs: official grading refuses to go without the course's own
        self.seed_secret = secret.for_official(seed_secret) if official else seed_secret
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.sandbox, self.reference = sandbox, reference
        unit = modules.get(self.rubric.module)
        self.rules, self.probes = unit.judge_rules(), unit.load_probes()
        self.public_only, self.seed, self.limits = public_only, seed, limits
        self.parallel = parallel  # checks of one submission run at once (default: the plan's, up to 2)
        expected_cache_dir().mkdir(mode=0o700, parents=True, exist_ok=True)  # exists before any sandbox, so it is hidden

    def start(self) -> None:
        """Warm up the sandbox and the reference worker before the first ``grade``."""
        if isinstance(self.sandbox, Startable):
            self.sandbox.start()
        self.reference.start()

    def grade_many(self, paths: Sequence[str | Path]) -> Iterator[tuple[Path, GradeReport | GraderError]]:
        """Grade in order; a file that cannot be graded yields its error instead of a report, and the
        next file is still graded."""
        for path in paths:
            try:
                yield Path(path), self.grade(path)
            except GraderError as e:
                yield Path(path), e
            except Exception as e:  # a grader bug on one file must not cost the others; never scored
                yield Path(path), GraderError(f"{shown(Path(path).name)}: internal grader error, please report it: "
                                              f"{type(e).__name__}: {shown(str(e))[:300]}")

    def close(self) -> None:
        """Nothing to close: the sandbox and the reference worker are the session's."""

    def __enter__(self: G) -> G:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def grade(self, path: str | Path) -> GradeReport:
        """Grade one file; SubmissionError if it cannot be read at all."""
        intake = read_submission(path, self.rubric.targets, self.limits)
        submission, student = intake.submission, intake.code
        seed, numpy_seed = ((self.seed, None) if self.seed is not None
                            else submission_seeds(submission.sha256, self.seed_secret or secret.practice_secret()))
        checks = self.rubric.select(self.public_only)
        blocked = outcomes.blocked(student, checks)
        runnable = tuple(c for c in checks if c.id not in blocked)
        job = plan(self.rubric, runnable, seed, numpy_seed)
        if self.parallel is not None:
            job = job.model_copy(update={"parallel": max(1, self.parallel)})
        results = dict(blocked)
        import_errors: tuple[str, ...] = ()
        backend = self.sandbox.info()
        if runnable:
            ran, import_errors, isolation = self._run(job, student, runnable, cell_labels(submission.cells))
            results.update(ran)
            if isolation is not None:  # only what this run's layer check verified
                backend = self.sandbox.info().model_copy(update={"isolation": isolation})
        ordered = tuple(results[c.id] for c in checks)
        score, max_score = total(ordered)
        return GradeReport(
            submission=submission.file_name, sha256=submission.sha256, rubric_id=self.rubric.id,
            rubric_hash=self.rubric.sha256, grader_version=__version__, seed=seed,
            backend=backend,
            extraction=ExtractionSummary(kept=student.kept, dropped=student.dropped,
                                         syntax_errors=student.syntax_errors, import_errors=import_errors,
                                         notes=submission.notes + student.notes),
            checks=ordered, score=score, max_score=max_score,
        )

    def _run(
        self, job: Job, student: StudentCode, checks: Sequence[CheckSpec], labels: dict[int, str]
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
            run = self.sandbox.run(job, student.chunks, student_dir, hide=(expected_cache_dir(),))
            worker.join()
            if failure:
                raise failure[0]
            expected = ref["expected"]
            # Visible checks are judged from their files as frozen before the hidden checks' inputs
            # entered the sandbox, when the run got that far: nothing after that (a deadline the
            # hidden phase ran into, a cut stream) may change a word of their feedback.
            frozen = run.frozen
            imported = read_import(frozen if frozen is not None else run.outputs)
            read: dict[str, CheckOutput] = {}
            for spec, planned in zip(checks, job.checks, strict=True):
                outputs, killed = (frozen, None) if frozen is not None and planned.visible else (run.outputs, run.killed)
                failed_def = outcomes.definition_failure(spec, student.chunks, imported, killed)
                if failed_def is not None:
                    read[spec.id] = failed_def
                    continue
                shapes = {k: v.shape for k, v in expected[spec.id].arrays.items()}
                got = outcomes.explain_name_error(read_check(outputs, spec.id, shapes), imported)
                if got.outcome == "missing" and killed:
                    got = CheckOutput(outcome="timeout", note=killed)
                read[spec.id] = got
            # the course generation the submission is written for decides what it was asked
            generation = self.rules.generation(read) if self.rules.generation else None
            code = Code({(c.cell, c.line + k): text for c in student.chunks for k, text in enumerate(c.source.splitlines())},
                        labels)
            results = {}
            for spec, planned in zip(checks, job.checks, strict=True):
                inputs = planned.decoded()
                called = self.probes[spec.probe].describe(inputs)
                results[spec.id] = judge(spec, called, inputs, read[spec.id], expected[spec.id], self.rules, generation,
                                         code)
            results = settle_pointers(results)
            import_errors = tuple(f"{code.place(e.cell, e.line)}: {code.relabel(e.error.text())}"
                                  for e in (imported.chunk_errors if imported else ()))
            return results, import_errors, run.isolation
        finally:
            shutil.rmtree(student_dir, ignore_errors=True)

