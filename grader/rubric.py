"""Rubric stage: load and validate a rubric file (TOML) into typed, versioned data.

A rubric is data only; it is never executed. It names its course module (an installed unit,
grader.modules); probes, comparators and diagnoses are referenced by name and resolved against
that unit, so a typo is an error naming the check when the rubric loads, not mid-grading.
"""

from __future__ import annotations

import hashlib

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10 (the student package supports it): the same parser, as tomli
    import tomli as tomllib  # type: ignore[no-redef,import-not-found,unused-ignore]
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from .errors import RubricError
from .models import Record, Visibility
from .nesting import MAX_DEPTH, toml_too_deep, too_deep

SUPPORTED_SCHEMA = 1


NOT_ASKED = "not asked"  # an ``asked`` entry's source for a generation that is not asked for the behaviour
NOT_APPLICABLE = "does not apply"  # ... for a generation the check does not apply to at all
Refusal = Literal["any", "named"]


class CaseSpec(Record):
    """One sub-case of a check (an output of its probe, or a glob of output names) whose provenance
    differs from its check's: asked in fewer generations, or refused with any exception.

    ``about``: what the reference does there, for the note shown when it is not scored ("the
    reference also rejects a fractional id such as 1.5")."""

    asked: tuple[str, ...] = ()
    about: str = ""
    refusal: Refusal | None = None


class CheckSpec(Record):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]{1,63}$")
    title: str
    points: float = Field(ge=0)
    visibility: Visibility = "visible"
    timeout_s: float = Field(gt=0, le=600)
    rtol: float = Field(ge=0)
    atol: float = Field(ge=0)
    hint: str = ""
    probe: str
    comparator: str = "match"
    diagnosis: str | None = None  # a likely-cause finder of the unit; default: by probe name, then check id
    needs: tuple[str, ...] = ()
    # Where the student was asked for this behaviour, one "generation: source" entry per course
    # generation ("older: test_unit_layer"), or "generation: not asked (why)"; see docs/RUBRIC.md.
    asked: tuple[str, ...] = ()
    about: str = ""  # what the reference does, for the note when the check is not asked at all
    # An expected refusal (the reference raised) is matched by the exception's class ("named", the
    # class the course names; where it is raised does not matter) or by any exception ("any": the
    # assignment asks for a refusal but names no class).
    refusal: Refusal = "named"
    cases: dict[str, CaseSpec] = Field(default_factory=dict)
    score_unasked: bool = False  # the rubric's setting unless the check sets its own
    generations: tuple[str, ...] = ()  # the rubric's, copied in when it loads

    @property
    def public(self) -> bool:
        return self.visibility == "visible"

    def source(self, generation: str, case: CaseSpec | None = None) -> str | None:
        """The ``asked`` source of ``generation`` for the check, or for one of its cases (which
        inherits the check's entries it does not name); None when neither names it."""
        for entries in ((case.asked if case else ()), self.asked):
            for entry in entries:
                name, _, where = entry.partition(":")
                if name.strip() == generation:
                    return where.strip()
        return None


class Withheld(Record):
    """A check of the course's full rubric that this copy leaves out: the student package's rubric
    keeps only the public checks (grader/dist/build.py) and lists here what the others are, no more
    than a student's report already says of them: their visibility and their points."""

    visibility: Visibility
    points: float = Field(ge=0)


class Rubric(Record):
    schema_version: int
    id: str
    title: str
    module: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    targets: tuple[str, ...]
    import_timeout_s: float = Field(gt=0, le=600)
    total_timeout_s: float = Field(gt=0, le=3600)
    checks: tuple[CheckSpec, ...]
    sha256: str
    due_date: str | None = None  # releases the after_due_date checks (grader.visibility); ISO 8601
    publish_date: str | None = None  # releases the after_published checks
    # The course generations whose material the ``asked`` entries cite (e.g. "older", "newer"); a
    # course of one generation cites it as "course".
    generations: tuple[str, ...] = ("course",)
    # Score behaviour the assignment never asked for (found only in the official solution); off by
    # default, when it is a 0-point note. A check's own ``score_unasked`` wins.
    score_unasked: bool = False
    withheld: tuple[Withheld, ...] = ()  # checks this copy leaves out (the student package's rubric)

    @model_validator(mode="after")
    def _dates(self) -> Rubric:
        from .visibility import parse_date

        for name in ("due_date", "publish_date"):
            value = getattr(self, name)
            if value is not None:
                parse_date(value, name)  # a DateError is a ValueError: pydantic reports it with the field
        return self

    @model_validator(mode="after")
    def _unique_ids(self) -> Rubric:
        ids = [c.id for c in self.checks]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate check ids: {', '.join(dupes)}")
        return self

    @model_validator(mode="after")
    def _provenance(self) -> Rubric:
        """Every scored check names, for each generation, where the student was asked for it."""
        known = set(self.generations)
        for c in self.checks:
            for entry in (*c.asked, *(e for case in c.cases.values() for e in case.asked)):
                name, colon, where = entry.partition(":")
                if not colon or name.strip() not in known or not where.strip():
                    raise ValueError(f"check {c.id}: asked entry {entry!r} is not 'generation: source' with a "
                                     f"generation of {', '.join(self.generations)}")
            missing = [g for g in self.generations if c.source(g) is None]
            if c.points > 0 and missing:
                raise ValueError(f"check {c.id} scores {c.points:g} points but does not say where the "
                                 f"{' and '.join(missing)} generation asks for it (asked = [\"{missing[0]}: ...\"])")
            sources = [c.source(g) or "" for g in self.generations]
            if c.points > 0 and all(s.startswith((NOT_ASKED, NOT_APPLICABLE)) for s in sources):
                raise ValueError(f"check {c.id} scores {c.points:g} points, but no generation asks for it: "
                                 "give it 0 points (a note) or name what asks for it")
            for key, case in {"": None, **c.cases}.items():
                if not (case.about if case else c.about) and any(
                        (c.source(g, case) or "").startswith(NOT_ASKED) for g in self.generations):
                    raise ValueError(f"check {c.id}{f' case {key!r}' if key else ''} is not asked in some "
                                     "generation; say what the reference does there (about = \"the reference also "
                                     "...\")")
        return self

    @property
    def max_score(self) -> float:
        return sum(c.points for c in self.checks)

    def select(self, public_only: bool) -> tuple[CheckSpec, ...]:
        return tuple(c for c in self.checks if c.public or not public_only)


def load_rubric(path: str | Path | None = None, *, module: str | None = None) -> Rubric:
    """Read, version-check and validate a rubric; RubricError says what to fix and where.

    Without ``path``: the rubric of the installed course module ``module``, else of the module
    grader.modules.choose picks without a notebook ($GRADER_MODULE, then the only one installed)."""
    from . import modules
    from .modules.choose import choose_module

    p = Path(path) if path is not None else (modules.get(module) if module else choose_module(None)).rubric_path
    try:
        raw = p.read_bytes()
        text = raw.decode("utf-8")
        if toml_too_deep(text):  # before tomllib, which would recurse (or take hours) on it
            raise RecursionError
        data = tomllib.loads(text)
    except FileNotFoundError:
        raise RubricError(f"rubric {p} not found; pass --rubric with a rubric .toml file") from None
    except IsADirectoryError:
        raise RubricError(f"rubric {p} is a directory; pass --rubric with a rubric .toml file") from None
    except OSError as e:
        raise RubricError(f"rubric {p} cannot be read ({e.strerror or e}); pass --rubric with a readable .toml file") \
            from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise RubricError(f"rubric {p} is not valid TOML: {e}") from None
    except RecursionError:
        raise RubricError(f"rubric {p} nests tables or arrays too deeply (at most {MAX_DEPTH} levels)") from None
    if too_deep(data):
        raise RubricError(f"rubric {p} nests tables or arrays too deeply (at most {MAX_DEPTH} levels)")
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise RubricError(f"rubric {p}: missing integer schema_version (this grader reads {SUPPORTED_SCHEMA})")
    if version != SUPPORTED_SCHEMA:
        age = "newer" if version > SUPPORTED_SCHEMA else "older"
        raise RubricError(f"rubric {p}: schema_version {version} is {age} than this grader's {SUPPORTED_SCHEMA}; "
                          f"upgrade the {'grader' if age == 'newer' else 'rubric'}")
    return _validate(p, data, hashlib.sha256(raw).hexdigest())


def _validate(p: Path, data: dict[str, Any], sha: str) -> Rubric:
    from . import modules
    from .errors import ModuleUnitError

    defaults = data.pop("defaults", {})
    for key in ("due_date", "publish_date"):  # TOML's own dates arrive as date/datetime objects
        if isinstance(data.get(key), date | datetime):
            data[key] = data[key].isoformat()
    try:
        unit = modules.get(str(data.get("module", "")))
        probes, rules = unit.load_probes(), unit.judge_rules()
    except ModuleUnitError as e:
        raise RubricError(f"rubric {p}: {e}") from None
    checks = []
    for raw in data.get("checks", []):
        merged = {**defaults, **raw}
        merged.setdefault("probe", merged.get("id"))
        probe = probes.get(merged["probe"])
        if probe is None:
            raise RubricError(f"rubric {p}: check {merged.get('id')!r} names unknown probe {merged['probe']!r}; "
                              f"known: {', '.join(sorted(probes))}")
        merged["needs"] = probe.needs
        merged.setdefault("score_unasked", data.get("score_unasked", False))
        merged["generations"] = data.get("generations", ("course",))
        comparator = merged.get("comparator", "match")
        if comparator not in rules.comparator_names():
            raise RubricError(f"rubric {p}: check {merged.get('id')!r} names unknown comparator {comparator!r}; "
                              f"known: {', '.join(sorted(rules.comparator_names()))}")
        diagnosis = merged.get("diagnosis")
        if diagnosis is not None and diagnosis not in rules.diagnoses:
            raise RubricError(f"rubric {p}: check {merged.get('id')!r} names unknown diagnosis {diagnosis!r}; "
                              f"known: {', '.join(sorted(rules.diagnoses))}")
        checks.append(merged)
    try:
        rubric = Rubric(**{**data, "checks": checks, "sha256": sha})
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        text = str(first["msg"]).removeprefix("Value error, ")
        raise RubricError(f"rubric {p}: {where}: {text}" if where else f"rubric {p}: {text}") from None
    missing = sorted({n for c in rubric.checks for n in c.needs} - set(rubric.targets))
    if missing:
        raise RubricError(f"rubric {p}: checks need {', '.join(missing)}, which are not in targets")
    return rubric
