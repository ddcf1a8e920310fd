"""Judge stage (pure): validated outputs + the reference's → a CheckResult with feedback.

Nothing here runs student code or reads sandbox files; it only compares data that
``grader.channel`` already validated, and explains the difference.
"""

from __future__ import annotations

from typing import Any

from ..channel import CheckOutput
from ..models import CheckResult, CheckStatus, Figure, shown
from ..rubric import CheckSpec
from . import asked, crash
from .compare import Cause, Mismatch, compare, one_line
from .rules import GENERIC_COMPARATOR, Comparator, JudgeRules  # noqa: F401  (the unit interface)

QUOTE = "  > "

_OUTCOME_STATUS: dict[str, CheckStatus] = {
    "error": "error", "oom": "oom", "timeout": "timeout", "crashed": "crashed", "missing": "crashed",
}


def judge(spec: CheckSpec, called: str, inputs: dict[str, Any], got: CheckOutput, expected: CheckOutput,
          rules: JudgeRules, generation: str | None = None, code: crash.Code | None = None) -> CheckResult:
    """Compare one check's outputs with the reference's and explain any difference, scoring only
    what the submission's course ``generation`` asked for (grader.judge.asked). ``code``: the
    student's kept lines, by (cell, line), for a cause that quotes the statement that raised."""
    code = code or crash.Code()
    if got.outcome != "ok":
        return _not_ok(spec, called, inputs, got, rules, generation, code)
    skip = rules.not_applicable.get(spec.comparator)
    if skip is not None and (reason := skip(got)):
        return _result(spec, "passed", f"Not applicable: {reason}.", called, got.duration_ms)
    scoped = asked.scope(spec, got, expected, generation)
    got = scoped.got
    matcher = rules.comparators.get(spec.comparator)
    mismatches = (matcher(got, expected, inputs) if matcher
                  else compare(got, expected, spec.rtol, spec.atol))
    if not mismatches:
        return _result(spec, "passed", "\n".join(scoped.beyond), called, got.duration_ms)
    diagnose = (rules.diagnoses.get(spec.diagnosis) if spec.diagnosis
                else rules.diagnoses.get(spec.probe) or rules.diagnoses.get(spec.id))
    found = (diagnose(got, expected, inputs) if diagnose else None) or crash.cause(
        got, expected, code, _meaning(rules, inputs), spec.needs)
    cause = Cause(found) if isinstance(found, str) else found
    lines = [m.text for m in mismatches[:4]]
    if len(mismatches) > 4:
        lines.append(f"... and {len(mismatches) - 4} more differences")
    if cause is not None:
        see = see_also(cause.upstream) if cause.upstream else ""
        lines.append(f"Likely cause: {cause.text}{see}.")
    lines.extend(scoped.beyond)
    hint = cause is None or (cause.hint and not cause.upstream)  # the hint is about this check's own part
    result = _result(spec, "failed", "\n".join(lines), called, got.duration_ms, hint=hint)
    return result.model_copy(update={"figures": _figures(got, expected, mismatches)})


def _not_ok(spec: CheckSpec, called: str, inputs: dict[str, Any], got: CheckOutput, rules: JudgeRules,
            generation: str | None, code: crash.Code) -> CheckResult:
    """A check whose probe did not finish: what happened, and a likely cause when the error tells one.
    Running out of memory where no memory budget was asked for (the check's ``oom`` case) is a note."""
    if asked.out_of_memory_unasked(spec, got, generation):
        return _result(spec, "passed", asked.memory_note(spec, _outcome_text(spec, got, code)), called, got.duration_ms)
    status = _OUTCOME_STATUS[got.outcome]
    # a target that could not be defined (the host's note) makes this check's hint beside the point
    hint = not (got.outcome == "error" and got.note)
    text = _outcome_text(spec, got, code)
    reason = rules.error_cause(got, inputs) if got.outcome == "error" and rules.error_cause else None
    if not reason and got.outcome in ("error", "oom") and not got.note:  # a host note explains it already
        reason = crash.error_cause(got, code, _meaning(rules, inputs), spec.needs)
    if reason:
        text += f"\nLikely cause: {reason}."
    result = _result(spec, status, text, called, got.duration_ms, hint=hint)
    if got.outcome == "error" and got.error is not None and got.error.message and spec.public:
        result = result.model_copy(update={"student_text": shown(got.error.message)})
    return result


def _meaning(rules: JudgeRules, inputs: dict[str, Any]) -> crash.Meaning | None:
    read = rules.crash_meaning
    return (lambda kind, message: read(kind, message, inputs)) if read else None


MAX_FIGURE_CELLS = 128 * 128


def _figures(got: CheckOutput, expected: CheckOutput, mismatches: list[Mismatch]) -> tuple[Figure, ...]:
    """Differing 2-D outputs (up to 128 x 128) with the reference's, so reports can draw them."""
    figures = []
    for m in mismatches:
        g, e = got.arrays.get(m.name), expected.arrays.get(m.name)
        if g is not None and e is not None and g.ndim == 2 and g.shape == e.shape and g.size <= MAX_FIGURE_CELLS:
            figures.append(Figure(name=m.name, got=tuple(map(tuple, g.tolist())), expected=tuple(map(tuple, e.tolist()))))
    return tuple(figures)


def not_gradable(spec: CheckSpec, reason: str) -> CheckResult:
    return _result(spec, "not_gradable", reason, "", 0.0)


def _outcome_text(spec: CheckSpec, got: CheckOutput, code: crash.Code) -> str:
    if got.outcome == "timeout":
        if got.note:  # the host stopped the whole run, e.g. while the module was being imported
            return f"stopped: {got.note} (an endless loop or a very slow computation at the top level?)"
        return (f"did not finish within {spec.timeout_s:g} s: an endless loop, or far too slow "
                "(look for a while loop whose condition never changes)")
    if got.outcome == "oom":
        return "ran out of memory" + (f": {_raised(got, code)}" if got.error else "")
    if got.outcome == "error" and got.error is not None:
        lead = f"{code.relabel(got.note)}\n" if got.note else ""  # the host's own explanation, when it has one
        return f"{lead}raised {_raised(got, code)}"
    if got.outcome == "crashed" and not got.note:
        if got.signal is not None:
            return f"the process was killed by signal {got.signal} (a segfault or abort in native code?)"
        if got.exit_code is not None:
            return (f"the process exited with status {got.exit_code} before reporting a result "
                    "(sys.exit or os._exit in your code?)")
    if got.outcome == "missing" and not got.note:
        return "no valid result was written for this check"
    return one_line(code.relabel(got.note), 400) or "no result"


def _raised(got: CheckOutput, code: crash.Code) -> str:
    """The exception the student's code raised: its class and place on one line, then its message
    (student text) quoted line by line, so that nothing in it can pass for our own feedback.

    A ``ProbeError`` with no place in the student's code is the check's own complaint about what
    that code offered (a missing method, a tensor of the wrong shape): it is introduced as the
    check's. It arrives from the sandbox like everything else, so it stays quoted all the same."""
    assert got.error is not None
    error = got.error
    head = one_line(error.type, 80) + (f" ({one_line(code.relabel(error.where), 200)})" if error.where else "")
    if not error.message:
        return head
    quoted = "\n".join(QUOTE + line for line in error.message.splitlines() or [""])
    if error.type == "ProbeError" and not error.where:
        return f"{head}: the check could not use what your code offered:\n{quoted}"
    return f"{head}, with this message from the code under test:\n{quoted}"


def see_also(upstream: str) -> str:
    return f" (see {upstream}, which fails too)"


def settle_pointers(results: dict[str, CheckResult]) -> dict[str, CheckResult]:
    """Drop "(see X, which fails too)" from a cause where check X passed after all (a diagnosis
    reads one check's outputs, not the others' verdicts)."""
    settled = dict(results)
    for check_id, result in results.items():
        for other, verdict in results.items():
            pointer = see_also(other)
            if verdict.status == "passed" and pointer in result.detail:
                result = result.model_copy(update={"detail": result.detail.replace(pointer, ""),
                                                   "message": result.message.replace(pointer, "")})
        settled[check_id] = result
    return settled


WITHHELD = {  # the student message of a non-visible check that did not pass (grader.visibility)
    "hidden": "Its details are for the course staff only.",
    "after_due_date": "Its details are released after the due date.",
    "after_published": "Its details are released when scores are published.",
}


def _result(spec: CheckSpec, status: CheckStatus, text: str, called: str, duration_ms: float,
            hint: bool = True) -> CheckResult:
    detail = "\n".join(x for x in (f"Called: {called}" if called and status != "passed" else "", text) if x)
    if hint and status not in ("passed", "not_gradable") and spec.hint:
        detail += f"\nHint: {spec.hint}"
    shown_now = spec.public or status in ("passed", "not_gradable")
    message = detail if shown_now else f"Did not pass. {WITHHELD[spec.visibility]}"
    return CheckResult(
        id=spec.id, title=spec.title, status=status, score=spec.points if status == "passed" else 0.0,
        max_score=spec.points, visibility=spec.visibility, message=shown(message), detail=shown(detail),
        duration_ms=duration_ms,
    )
