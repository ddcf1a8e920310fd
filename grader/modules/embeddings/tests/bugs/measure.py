"""Measure the feedback on the catalog: correct styles at full marks, and bugs whose first likely
cause names the real bug.

    python -m grader.modules.embeddings.tests.bugs.measure         # this checkout's grader
    python -m grader.modules.embeddings.tests.bugs.measure --json  # one JSON object (for a before/after diff)

A bug's *first failing check* is the first of its catalog `fails` (the check the bug is about);
its cause is right when that check's message holds the catalog's `cause` text, wrong when the
check gives another likely cause, and none when it gives no likely cause. The catalog's own test
(``test_checks.py`` beside this folder) holds every entry to "right"; this prints the share. (A
checkout from before the catalog moved into the unit has it as ``python -m tests.bugs.measure``.)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from typing import Any

from .catalog import BUGS, STYLES

Verdict = str  # "right" | "wrong" | "none" | "missed"


def bug_verdict(checks: dict[str, Any], fails: tuple[str, ...], cause: str) -> Verdict:
    failing = [checks[c] for c in fails if c in checks and checks[c].status != "passed"]
    if not failing:
        return "missed"
    first = failing[0]
    if cause in first.message:
        return "right"
    return "wrong" if "Likely cause: " in (first.detail or first.message) else "none"


def measure() -> dict[str, Any]:
    from grader.unittesting import Session

    styles: dict[str, float] = {}
    bugs: dict[str, Verdict] = {}
    with Session() as session:
        grader = session.grader(module="embeddings")
        for style in STYLES:
            report = grader.grade(style.path)
            styles[style.name] = 100.0 * report.score / report.max_score if report.max_score else 0.0
        for bug in BUGS:
            checks = {c.id: c for c in grader.grade(bug.path).checks}
            bugs[bug.name] = bug_verdict(checks, bug.fails, bug.cause)
    return {"styles": styles, "bugs": bugs}


def summary(result: dict[str, Any]) -> str:
    styles, bugs = result["styles"], result["bugs"]
    full = sum(score >= 100.0 for score in styles.values())
    counts = Counter(bugs.values())
    lines = [f"correct styles at 100/100: {full} of {len(styles)}"]
    lines += [f"  {name}: {score:.1f}" for name, score in sorted(styles.items()) if score < 100.0]
    lines.append(f"bugs: {len(bugs)}; first likely cause right {counts['right']}, wrong {counts['wrong']}, "
                 f"none {counts['none']}, not caught {counts['missed']} "
                 f"({100.0 * counts['right'] / max(1, len(bugs)):.0f} % right)")
    lines += [f"  {verdict}: {name}" for name, verdict in sorted(bugs.items()) if verdict != "right"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.modules.embeddings.tests.bugs.measure",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = measure()
    print(json.dumps(result, indent=1) if args.json else summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
