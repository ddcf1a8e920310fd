"""What a check may score: only what the student was asked for (pure).

A rubric check names, per course generation, where the assignment asks for its behaviour
(``asked``), and which of its sub-cases (probe outputs) are asked in fewer generations (``cases``).
Before a check is compared, its unasked outputs are set to the reference's own values, so that
neither the verdict nor a likely cause can rest on them; what differed there is returned as a
0-point note instead. Expected refusals are matched by class, or by any exception where the
assignment names none (``refusal``). A rubric's or check's ``score_unasked`` keeps everything
scored as the reference does it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import numpy as np

from ..channel import CheckOutput
from ..rubric import NOT_ASKED, CaseSpec, CheckSpec
from .compare import compare, one_line

NOTE = "Beyond what this assignment asks (not scored)"


def raised_class(value: Any) -> str | None:
    """The exception class a refusal fact names ("ValueError", "raised TypeError", "ValueError from
    numpy ..."), or None when the value is not a refusal ("none", an array, a shape)."""
    if not isinstance(value, str):
        return None
    name = value.removeprefix("raised ").split(" ", 1)[0]
    exception = name.endswith(("Error", "Exception", "Exit", "Interrupt", "Warning")) or name == "StopIteration"
    return name if name.isidentifier() and exception else None


def _case(spec: CheckSpec, output: str) -> CaseSpec | None:
    """The case of an output: the one keyed by its exact name, else the first glob that matches it."""
    if output in spec.cases:
        return spec.cases[output]
    return next((case for key, case in spec.cases.items() if fnmatchcase(output, key)), None)


def _unasked(spec: CheckSpec, case: CaseSpec | None, generation: str | None) -> bool:
    """Not asked in ``generation``; with the generation unknown, not asked in one of them (the
    student gets the benefit of the doubt)."""
    generations = (generation,) if generation in spec.generations else spec.generations
    return any((spec.source(g, case) or "").startswith(NOT_ASKED) for g in generations)


def _refusal_matches(spec: CheckSpec, output: str, got: Any, expected: Any) -> bool:
    """The student refused where the reference did, as the assignment asks for it."""
    want, have = raised_class(expected), raised_class(got)
    if want is None or have is None:
        return False
    case = _case(spec, output)
    rule = (case.refusal if case and case.refusal else None) or spec.refusal
    return rule == "any" or have == want


OOM = "oom"  # the case key for running out of memory: the sandbox's budget is not asked for


def _memory_unasked(spec: CheckSpec, generation: str | None) -> bool:
    case = spec.cases.get(OOM)
    return case is not None and _unasked(spec, case, generation)


def out_of_memory_unasked(spec: CheckSpec, got: CheckOutput, generation: str | None) -> bool:
    """The check ran out of memory, and doing it within the sandbox's memory is not asked for (its
    ``oom`` case). Any other unfinished check fails: it did not get as far as what was asked."""
    if spec.score_unasked:
        return False
    out_of_memory = got.outcome == "oom" or (got.error is not None and got.error.type == "MemoryError")
    return out_of_memory and _memory_unasked(spec, generation)


def memory_note(spec: CheckSpec, what: str) -> str:
    case = spec.cases.get(OOM)
    return f"{NOTE}: {case.about if case else 'the reference fits in memory'}; yours {one_line(what, 200)}."


@dataclass(frozen=True)
class Scoped:
    """A check's outputs as they are scored, and what differed only where nothing was asked."""

    got: CheckOutput
    beyond: tuple[str, ...]  # note lines, one per unasked output that differed


def scope(spec: CheckSpec, got: CheckOutput, expected: CheckOutput, generation: str | None) -> Scoped:
    """``got`` with every refusal that counts and every unasked output replaced by the reference's."""
    facts, arrays, rejected = dict(got.facts), dict(got.arrays), dict(got.rejected)
    for name, want in expected.facts.items():
        if name in facts and facts[name] != want and _refusal_matches(spec, name, facts[name], want):
            facts[name] = want
    refused = got.model_copy(update={"facts": dict(facts)})
    beyond: list[str] = []
    memory = not spec.score_unasked and _memory_unasked(spec, generation)
    unasked = [] if spec.score_unasked else [
        name for name in (*expected.facts, *expected.arrays)
        if _unasked(spec, _case(spec, name), generation)
        or (memory and raised_class(got.facts.get(name)) == "MemoryError")]
    if unasked:
        differing = {m.name: m for m in compare(refused, expected, spec.rtol, spec.atol)}
        notes: dict[str, list[str]] = {}
        for name in unasked:
            if name in differing:
                notes.setdefault(_about(spec, name, got), []).append(one_line(differing[name].text, 160))
            _take_expected(name, expected, facts, arrays, rejected)
        beyond = [f"{NOTE}: {about} ({'; '.join(texts[:3])}{'; ...' if len(texts) > 3 else ''})."
                  for about, texts in notes.items()]
    update: dict[str, Any] = {"facts": facts, "arrays": arrays, "rejected": rejected}
    return Scoped(got.model_copy(update=update), tuple(beyond))


def _take_expected(name: str, expected: CheckOutput, facts: dict[str, Any], arrays: dict[str, np.ndarray],
                   rejected: dict[str, str]) -> None:
    rejected.pop(name, None)
    if name in expected.arrays:
        facts.pop(name, None)
        arrays[name] = expected.arrays[name]
    else:
        arrays.pop(name, None)
        facts[name] = expected.facts[name]


def _about(spec: CheckSpec, name: str, got: CheckOutput) -> str:
    """What the reference does where ``name`` is not asked (the ``oom`` case's words for a
    MemoryError), for the note."""
    case = spec.cases.get(OOM) if raised_class(got.facts.get(name)) == "MemoryError" else _case(spec, name)
    return (case.about if case and case.about else spec.about) or "the reference behaves differently here"
