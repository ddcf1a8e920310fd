"""Grade notebooks in a separate grader process, the way ``grader grade`` does, and write JSON results.

Usage: ``python tt_runner.py SPEC.json TOKEN``. SPEC holds ``backend``, ``rubric``, ``seed``, ``paths``
and ``out``. The notebooks are graded as one batch (``Grader.grade_many``, with the CLI's early
sandbox and reference worker when the grader offers them), so the second notebook of a batch is
"the next student" of the first. TOKEN is only here so that the process can be recognised (hostile
notebooks use it to make sure they target their own grader and nothing else on the machine).

Running the grader out of the test process keeps pytest safe from attacks aimed at the grader
process, and gives every case a fresh interpreter (nothing cached in memory between cases).
"""

from __future__ import annotations

import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any


def _early(backend: str, rubric: str) -> tuple[Any, Any]:
    """The CLI's head start (a prepared local harness, a started reference worker), if available."""
    sandbox = reference = None
    try:
        from grader import cli

        if hasattr(cli, "start_sandbox_early"):
            sandbox = cli.start_sandbox_early(backend)
        if hasattr(cli, "start_reference_early"):
            reference = cli.start_reference_early(Path(rubric))
    except Exception:  # the CLI's internals changed: grade without the head start
        traceback.print_exc()
    return sandbox, reference


def main() -> int:
    spec = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    from grader import Grader, GraderError

    sandbox, reference = _early(spec["backend"], spec["rubric"])
    options: dict[str, Any] = {"seed": spec["seed"]}
    if reference is not None:
        options["reference"] = reference
    results: list[dict[str, Any]] = []
    started = time.monotonic()
    try:
        grader = Grader(spec["rubric"], sandbox or spec["backend"], **options)
    except TypeError:  # an older Grader without ``reference=``
        options.pop("reference", None)
        grader = Grader(spec["rubric"], sandbox or spec["backend"], **options)
    with grader:
        paths = [Path(p) for p in spec["paths"]]
        outcomes = (grader.grade_many(paths) if hasattr(grader, "grade_many")
                    else ((p, _grade_one(grader, p)) for p in paths))
        while True:
            try:
                path, outcome = next(outcomes)
            except StopIteration:
                break
            except GraderError as e:  # a grader error that grade_many let through aborts the batch
                results.append({"error": type(e).__name__, "message": str(e), "seconds": time.monotonic() - started})
                _save(spec["out"], results)
                break
            entry: dict[str, Any] = {"path": str(path), "seconds": time.monotonic() - started}
            if isinstance(outcome, BaseException):
                entry.update(error=type(outcome).__name__, message=str(outcome))
            else:
                entry["report"] = outcome.model_dump(mode="json")
            results.append(entry)
            _save(spec["out"], results)     # as we go: a later submission may hang or kill this process
            started = time.monotonic()
    _save(spec["out"], results)
    return 0


def _save(out: str, results: list[dict[str, Any]]) -> None:
    tmp = Path(out + ".tmp")
    tmp.write_text(json.dumps({"results": results}), encoding="utf-8")
    tmp.replace(out)


def _grade_one(grader: Any, path: Path) -> Any:
    from grader import SubmissionError

    try:
        return grader.grade(path)
    except SubmissionError as e:
        return e


if __name__ == "__main__":
    sys.exit(main())
