"""Class analytics (pure): score distribution, pass rate per check, top failure causes, warnings.

This is staff material: causes are read from each check's ``detail``, hidden checks included, but
only where the judge put them (``cause_of``): student text never becomes one of "our" causes.
Names and reasons are stored through ``shown``.
"""

from __future__ import annotations

import builtins
import re
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..models import CheckResult, shown
from ..results.record import StoredResult
from ..rubric import Rubric

SCHEMA_VERSION = 1
BINS = 10
NEARLY_ALL_FAIL = 0.9  # a check failed by at least this share of graded submissions is flagged...
MIN_GRADED = 3  # ...once at least this many submissions were graded
TOP_CAUSES = 12


def build_summary(results: Sequence[StoredResult], rubric: Rubric | None, missing: Sequence[str] = (),
                  names: Mapping[str, str] | None = None, late: Mapping[str, bool] | None = None) -> dict[str, Any]:
    """summary.json: everything the class page shows, as plain data (``missing``: roster ids
    without a submission; ``names``: roster names, which win over the names submissions give, and
    name the missing students too; ``late``: the submissions handed in after the due date)."""
    names, late = names or {}, late or {}
    graded = [r for r in results if r.status == "graded" and r.report is not None]
    not_run = {r.student_id: why for r in graded if (why := did_not_run(r)) is not None}
    max_score = rubric.max_score if rubric is not None else max((r.max_score or 0.0 for r in graded), default=0.0)
    percents = [100.0 * (r.score or 0.0) / max_score if max_score else 0.0 for r in graded]
    checks = _check_stats(graded, rubric)
    warnings = [_warning(c) for c in checks if c["nearly_all_fail"]]
    not_graded = [{"student_id": r.student_id, "status": r.status, "reason": shown(r.reason)}
                  for r in results if r.status != "graded"]
    faults = sum(r.status == "failed_to_grade" for r in results)
    if faults:
        warnings.append(f"{faults} submission(s) could not be graded because of a grader or sandbox fault; "
                        "fix the cause and run the batch again (only those are regraded).")
    scores = [r.score or 0.0 for r in graded]
    return {
        "schema_version": SCHEMA_VERSION,
        "assignment": {"id": rubric.id if rubric else "", "title": rubric.title if rubric else "",
                       "max_score": max_score},
        "counts": {"submissions": len(results), "graded": len(graded),
                   "invalid": sum(r.status == "invalid" for r in results), "failed_to_grade": faults,
                   "missing": len(missing), "late": sum(bool(late.get(r.student_id)) for r in results),
                   "did_not_run": len(not_run)},
        "score": _stats(scores),
        "histogram": {"unit": "percent of max score", "edges": [100.0 * i / BINS for i in range(BINS + 1)],
                      "counts": _histogram(percents)},
        "visibility": dict(Counter(c["visibility"] for c in checks)),
        "checks": checks,
        "did_not_run": [{"student_id": sid, "reason": why} for sid, why in sorted(not_run.items())],
        "failure_causes": failure_causes(r for r in graded if r.student_id not in not_run),
        "warnings": warnings,
        "not_graded": not_graded,
        "missing": list(missing),
        "students": [{"student_id": r.student_id, "name": shown(names.get(r.student_id) or r.name, one_line=True),
                      "status": r.status, "score": r.score, "max_score": r.max_score,
                      "late": bool(late.get(r.student_id)), "submitted_at": r.submitted_at} for r in results]
        + [{"student_id": sid, "name": shown(names.get(sid, ""), one_line=True), "status": "missing", "score": None,
            "max_score": None, "late": False, "submitted_at": ""} for sid in missing],
    }


def _stats(scores: list[float]) -> dict[str, float | None]:
    if not scores:
        return {"mean": None, "median": None, "min": None, "max": None, "stdev": None}
    return {"mean": round(statistics.fmean(scores), 4), "median": statistics.median(scores),
            "min": min(scores), "max": max(scores),
            "stdev": round(statistics.pstdev(scores), 4)}


def _histogram(percents: Iterable[float]) -> list[int]:
    counts = [0] * BINS
    for p in percents:
        counts[min(BINS - 1, max(0, int(p * BINS // 100)))] += 1  # 100 % falls in the last bin
    return counts


def _check_stats(graded: list[StoredResult], rubric: Rubric | None) -> list[dict[str, Any]]:
    by_id: dict[str, list[CheckResult]] = defaultdict(list)
    for r in graded:
        assert r.report is not None
        for c in r.report.checks:
            by_id[c.id].append(c)
    specs = ([(c.id, c.title, c.visibility, c.points) for c in rubric.checks] if rubric is not None else
             [(i, cs[0].title, cs[0].visibility, cs[0].max_score) for i, cs in by_id.items()])
    stats = []
    for check_id, title, visibility, points in specs:
        results = by_id.get(check_id, [])
        passed = sum(c.status == "passed" for c in results)
        n = len(results)
        stats.append({
            "id": check_id, "title": title, "visibility": visibility, "points": points, "graded": n,
            "passed": passed, "pass_rate": round(passed / n, 4) if n else None,
            "mean_score": round(statistics.fmean(c.score for c in results), 4) if n else None,
            "statuses": dict(Counter(c.status for c in results)),
            "nearly_all_fail": n >= MIN_GRADED and (n - passed) / n >= NEARLY_ALL_FAIL,
        })
    return stats


def _warning(check: dict[str, Any]) -> str:
    failed = check["graded"] - check["passed"]
    return (f"{check['id']}: {failed} of {check['graded']} graded submissions fail it. When nearly everyone "
            "fails a check, the check, its reference or the assignment text is usually wrong; review it "
            "before releasing grades.")


CAUSE, HINT, CALLED = "Likely cause: ", "Hint: ", "Called: "
STATUS_CAUSES = {
    "crashed": "crashed before reporting a result",
    "oom": "ran out of memory",
    "failed": "wrong output (no specific cause recognised)",
}


def cause_of(check: CheckResult) -> str:
    """The most specific reason a check did not pass, taken only from what the judge and the host
    wrote, never from text the student's code produced (exception messages, printed facts).

    The judge lays a failed check's ``detail`` out as ``Called:``, the differences, then at most
    one ``Likely cause:`` line and the rubric's ``Hint:``. Student text (a fact, an exception
    message) can hold newlines, so a ``Likely cause:`` line counts only in that place, and only if
    it is the one such line; an error counts only by its builtin exception type.
    """
    body = _body(check)
    if check.status == "failed":
        return _judged_cause(body) or STATUS_CAUSES["failed"]
    if check.status == "error":
        return _raised(body[0] if body else "")
    if check.status == "timeout":  # the judge's own sentence, up to the first colon
        first = body[0] if body else ""
        return first.split(":")[0][:160] if first.startswith(("did not finish", "stopped")) else "timed out"
    if check.status == "not_gradable":  # written by the grader from the rubric's target names
        return (body[0] if body else "not gradable")[:160]
    return STATUS_CAUSES.get(check.status, check.status)


def _body(check: CheckResult) -> list[str]:
    """The lines of a check's detail after its ``Called:`` line and that line's indented
    continuations (an input array over several lines)."""
    lines = [ln for ln in check.detail.splitlines() if ln.strip()]
    if lines and lines[0].startswith(CALLED):
        lines = lines[1:]
        while lines and lines[0][:1].isspace():
            lines = lines[1:]
    return lines


def _judged_cause(body: list[str]) -> str:
    causes = [ln for ln in body if ln.startswith(CAUSE)]
    tail = body[:-1] if body and body[-1].startswith(HINT) else body
    if len(causes) != 1 or not tail or tail[-1] != causes[0]:
        return ""
    return causes[0].removeprefix(CAUSE).rstrip(".")


def _raised(line: str) -> str:
    """``raised <Type>`` for a builtin exception type; a class the submission names is not shown."""
    m = re.match(r"raised ([A-Za-z_]\w*)(?::|\s|$)", line)
    if m is None:
        return "raised an exception"
    builtin = getattr(builtins, m.group(1), None)
    if isinstance(builtin, type) and issubclass(builtin, BaseException):
        return f"raised {m.group(1)}"
    return "raised an exception of a class the submission defines"


def _key(text: str) -> str:
    """Causes that differ only in numbers (seeded inputs) are one cause."""
    return re.sub(r"-?\d+(\.\d+)?(e-?\d+)?", "#", text)


def failure_causes(graded: Iterable[StoredResult], top: int = TOP_CAUSES) -> list[dict[str, Any]]:
    """The diagnoses that cost the most students, most first. A specific diagnosis (the judge's
    likely cause, a definition that failed) is one bug wherever it shows, so it is one row listing
    every check it failed; a generic one ("raised IndexError") is counted per check."""
    groups: dict[tuple[str, str], list[tuple[str, str, str]]] = defaultdict(list)
    for r in graded:
        assert r.report is not None
        for c in r.report.checks:
            if c.status != "passed":
                cause, specific = diagnosis(c)
                cause = shown(cause, one_line=True)
                groups[("" if specific else c.id, _key(cause))].append((r.student_id, c.id, cause))
    ranked = sorted(groups.items(), key=lambda kv: (-len({s for s, _, _ in kv[1]}), -len(kv[1]), kv[0]))
    out = []
    for _, members in ranked[:top]:
        examples = Counter(cause for _, _, cause in members)
        students = sorted({s for s, _, _ in members})
        checks = [check for check, _ in Counter(c for _, c, _ in members).most_common()]
        out.append({"cause": examples.most_common(1)[0][0], "checks": checks, "variants": len(examples),
                    "count": len(students), "students": students})
    return out


def diagnosis(check: CheckResult) -> tuple[str, bool]:
    """What the summary ranks a check that did not pass by: its cause (``cause_of``) and whether
    that names one bug (a judged likely cause, a definition that failed) rather than a symptom."""
    body = _body(check)
    unrun = _not_run(check.status, body)
    if unrun is not None:
        return unrun, True
    cause = cause_of(check)
    return cause, check.status == "failed" and cause != STATUS_CAUSES["failed"]


NOT_STARTED = "the starter's raise NotImplementedError() is still there"


def _not_run(status: str, body: list[str]) -> str | None:
    """Why a check never reached the code under test, in the judge's own words (its first line
    after ``Called:``, written before any student text): the target is not defined, its definition
    failed, or the module did not import. None when the code under test ran."""
    first = body[0] if body else ""
    if status == "not_gradable":
        return first[:160] or "not gradable"
    if status == "error":
        m = re.match(r"defining ([A-Za-z_]\w*) failed", first) or re.match(
            r"([A-Za-z_]\w*) is not defined, because defining it failed", first)
        if m is None:
            return None
        # the judge ends the line with why (a student's cell label sits inside it, never at its end)
        unstarted = first.endswith(("(NotImplementedError)", f"({NOT_STARTED}: finish it)"))
        return f"defining {m.group(1)} failed" + (f" ({NOT_STARTED})" if unstarted else "")
    if status in ("crashed", "timeout") and "importing the module" in first:
        return first.split(":")[0][:160]
    return None


def did_not_run(result: StoredResult) -> str | None:
    """Why a graded notebook did not run at all, or None: no check passed on its own merits (a
    check that does not apply passes without running), and every other check stopped before the
    code under test was called. The reason is in our words: the first syntax error's cell, a
    failed definition's exception type, or the checks' own reason."""
    report = result.report
    if report is None:
        return None
    reasons = []
    for c in report.checks:
        body = _body(c)
        if c.status == "passed":
            if not (body and body[0].startswith("Not applicable")):
                return None
            continue
        why = _not_run(c.status, body)
        if why is None:
            return None
        reasons.append(why)
    if not reasons:
        return None
    ex = report.extraction
    if ex.syntax_errors:
        cells = sorted({e.cell for e in ex.syntax_errors})
        return f"syntax error in cell{'s' if len(cells) > 1 else ''} {', '.join(map(str, cells))}"
    for error in ex.import_errors:
        m = re.search(r", line \d+: ([A-Za-z_]\w*): ", error)
        if m is not None:
            return f"{_raised('raised ' + m.group(1)).removeprefix('raised ')} while defining its code"
    return Counter(reasons).most_common(1)[0][0]
