"""Grade mutants, hold them against the reviewed equivalents, and sum up the kill rates.

A mutant is killed when at least one check does not pass. A survivor is either listed as
equivalent in the reviewed file (``tests/mutants/equivalent.toml``), with the reason no student
could be wrong that way, or it is a gap in the checks: the gate fails.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import tomllib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import GraderError, SelftestError
from ..models import GradeReport
from ..pipeline import Grader
from .mutate import Mutant, Source

DEFAULT_GRADING_SEED = 0


class Equivalent(BaseModel):
    """A surviving mutant reviewed as equivalent: no student could be wrong by making that change."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=1)
    reason: str = Field(min_length=10)
    # equivalent under the assignment: it changes only what the assignment never asks for
    # (docs/RUBRIC.md), so the kill rate stays a rate on asked behaviour
    unasked: bool = False


class EquivalentsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    schema_version: Literal[1]
    equivalent: tuple[Equivalent, ...] = ()

    @field_validator("equivalent")
    @classmethod
    def _unique(cls, items: tuple[Equivalent, ...]) -> tuple[Equivalent, ...]:
        ids = [e.id for e in items]
        if dupes := sorted({i for i in ids if ids.count(i) > 1}):
            raise ValueError(f"listed more than once: {', '.join(dupes)}")
        return items


def load_equivalents(path: Path) -> dict[str, str]:
    """id → reason from the reviewed file; a missing file lists nothing."""
    if not path.exists():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        parsed = EquivalentsFile.model_validate(data)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise SelftestError(f"{path}: cannot be read as TOML ({e}); fix the file") from None
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise SelftestError(f"{path}: {where}: {first['msg']}; each [[equivalent]] needs an id and a reason") from None
    return {e.id: e.reason for e in parsed.equivalent}


@dataclass(frozen=True)
class Outcome:
    """How the grader did on one mutant: the checks that did not pass (none: it survived)."""

    mutant: Mutant
    failed: tuple[str, ...]
    failed_visible: tuple[str, ...]

    @property
    def killed(self) -> bool:
        return bool(self.failed)


def outcome_of(mutant: Mutant, report: GradeReport) -> Outcome:
    bad = [c for c in report.checks if c.status != "passed"]
    return Outcome(mutant, tuple(c.id for c in bad), tuple(c.id for c in bad if c.visibility == "visible"))


GraderFactory = Callable[[], Grader]


@contextmanager
def graders(factory: GraderFactory) -> Iterator[Callable[[], Grader]]:
    """One grader per thread, made on first use and closed at the end."""
    local, made, lock = threading.local(), [], threading.Lock()

    def get() -> Grader:
        if not hasattr(local, "grader"):
            local.grader = factory()
            with lock:
                made.append(local.grader)
        return local.grader  # type: ignore[no-any-return]

    try:
        yield get
    finally:
        for g in made:
            g.close()


def check_baselines(sources: Sequence[Source], grader: Grader) -> None:
    """Every unmutated source must pass every check, or its mutants prove nothing."""
    for source in sources:
        report = grader.grade(source.path)
        if not report.all_passed:
            failed = ", ".join(c.id for c in report.checks if c.status != "passed")
            raise SelftestError(f"{source.path}: the unmutated file fails {failed} ({report.score:g}/"
                                f"{report.max_score:g}); mutation testing needs a correct source")


def grade_mutants(mutants: Sequence[Mutant], factory: GraderFactory, *, jobs: int = 1,
                  on_done: Callable[[Outcome], None] | None = None) -> list[Outcome]:
    """Grade each mutant (``jobs`` in parallel, one grader each) and return outcomes in input order."""
    scratch = Path(tempfile.mkdtemp(prefix="grader-mutants-"))
    try:
        with graders(factory) as get:
            def one(item: tuple[int, Mutant]) -> Outcome:
                n, mutant = item
                folder = scratch / str(n)
                folder.mkdir()
                try:
                    outcome = outcome_of(mutant, get().grade(mutant.write(folder, mutant.source.path.stem)))
                except GraderError as e:
                    raise SelftestError(f"mutant {mutant.id} could not be graded: {e}") from e
                finally:
                    shutil.rmtree(folder, ignore_errors=True)
                if on_done is not None:
                    on_done(outcome)
                return outcome

            with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="mutant") as pool:
                return list(pool.map(one, enumerate(mutants)))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@dataclass
class Tally:
    """Counts for one source (with its generation) or for all sources of one generation."""

    label: str
    generation: str = ""
    total: int = 0
    killed: int = 0
    equivalent: int = 0
    hidden_only: int = 0

    @property
    def rate(self) -> float | None:
        """Killed over non-equivalent mutants; None when there are none."""
        counted = self.total - self.equivalent
        return self.killed / counted if counted else None

    def add(self, outcome: Outcome, equivalent: bool) -> None:
        self.total += 1
        if outcome.killed:
            self.killed += 1
            self.hidden_only += not outcome.failed_visible
        elif equivalent:
            self.equivalent += 1


@dataclass
class Summary:
    by_source: dict[str, Tally] = field(default_factory=dict)
    by_generation: dict[str, Tally] = field(default_factory=dict)
    survivors: list[Outcome] = field(default_factory=list)
    equivalent_survivors: list[Outcome] = field(default_factory=list)
    killed_but_listed: list[Outcome] = field(default_factory=list)
    unknown_listed: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """The gate: every non-equivalent mutant killed and the reviewed file matches what happened."""
        return not (self.survivors or self.killed_but_listed or self.unknown_listed)


def summarize(outcomes: Sequence[Outcome], equivalents: dict[str, str], generated: Sequence[Mutant], *,
              every_source: bool = False, foreign: frozenset[str] = frozenset()) -> Summary:
    """Tally ``outcomes``. Listed ids that ``generated`` (all mutants of the sources, sampled or not) lacks are
    stale; with ``every_source`` (the default sources were used) so are ids of sources that no longer exist,
    except those of ``foreign`` sources (another course module's, reviewed in the same file)."""
    summary = Summary()
    for o in outcomes:
        listed = o.mutant.id in equivalents
        source, generation = o.mutant.source.name, o.mutant.source.generation
        summary.by_source.setdefault(source, Tally(source, generation)).add(o, listed)
        summary.by_generation.setdefault(generation, Tally(f"all {generation}")).add(o, listed)
        if o.killed and listed:
            summary.killed_but_listed.append(o)
        elif not o.killed:
            (summary.equivalent_survivors if listed else summary.survivors).append(o)
    names = {m.source.name for m in generated}
    ids = {m.id for m in generated}
    summary.unknown_listed = sorted(i for i in equivalents
                                    if (i.split("/", 1)[0] in names
                                        or (every_source and i.split("/", 1)[0] not in foreign)) and i not in ids)
    return summary
