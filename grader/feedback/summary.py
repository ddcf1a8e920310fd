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

from ..batch.store import StoredResult
from ..models import CheckResult, shown
from ..rubric import Rubric

SCHEMA_VERSION = 1
BINS = 10
NEARLY_ALL_FAIL = 0.9  # a check failed by at least this share of graded submissions is flagged...
MIN_GRADED = 3  # ...once at least this many submissions were graded
TOP_CAUSES = 12


def build_summary(results: Sequence[StoredResult], rubric: Rubric | None, missing: Sequence[str] = (),
                  names: Mapping[str, str] | None = None) -> dict[str, Any]:
    """summary.json: everything the class page shows, as plain data (``missing``: roster ids
    without a submission; ``names``: roster names, which win over the names submissions give)."""
    names = names or {}
    graded = [r for r in results if r.status == "graded" and r.report is not None]
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
                   "missing": len(missing)},
        "score": _stats(scores),
        "histogram": {"unit": "percent of max score", "edges": [100.0 * i / BINS for i in range(BINS + 1)],
                      "counts": _histogram(percents)},
        "visibility": dict(Counter(c["visibility"] for c in checks)),
        "checks": checks,
        "failure_causes": failure_causes(graded),
        "warnings": warnings,
        "not_graded": not_graded,
        "missing": list(missing),
        "students": [{"student_id": r.student_id, "name": shown(names.get(r.student_id) or r.name, one_line=True),
                      "status": r.status, "score": r.score, "max_score": r.max_score} for r in results],
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
    lines = [ln for ln in check.detail.splitlines() if ln.strip()]
    body = lines[1:] if lines and lines[0].startswith(CALLED) else lines
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
    """The most frequent (check, cause) pairs among checks that did not pass."""
    groups: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for r in graded:
        assert r.report is not None
        for c in r.report.checks:
            if c.status != "passed":
                cause = shown(cause_of(c), one_line=True)
                groups[(c.id, _key(cause))].append((r.student_id, cause))
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    out = []
    for (check_id, _), members in ranked[:top]:
        examples = Counter(cause for _, cause in members)
        out.append({"check": check_id, "cause": examples.most_common(1)[0][0], "variants": len(examples),
                    "count": len(members), "students": sorted(s for s, _ in members)})
    return out
