"""Red-team suite: hostile notebooks against the grader, on every backend.

Each graded case writes one hostile notebook and grades it, followed by a clean copy of the same
implementation ("the next student"), as one batch in a fresh grader process. Then it checks:

1. no gain: the hostile notebook passes no check that the same implementation fails without the
   attack, and scores no more (for attacks on the buggy base: grad_accumulate still fails);
2. a bounded, well-labelled outcome: grading finishes within the limit, with the expected statuses
   and a clear message;
3. the host is unharmed: the grader process survived, no marker file outside the sandbox, no
   process left behind, no connection to the loopback listener, the victim directory intact, no
   secret of the grader's environment in the report, and the next student is graded exactly as
   without the attack (also in a new grader process, for attacks that aim at caches).

Known holes of the practice (local) backend are strict xfails with the reason; see the report.
"""

from __future__ import annotations

import io
import json
import os
import re
import threading
from pathlib import Path
from typing import Any

import pytest
import tt_attacks as attacks
import tt_hostile as nb
from tt_support import (
    GRADING_LIMIT_S,
    SEED,
    SEED2,
    Baselines,
    Host,
    canary,
    leftover_processes,
    marker_files,
    passed,
    private_cache,
    run_grader,
    statuses,
)

BACKENDS = ("local", "docker")


def _params(cases: list[attacks.Case]) -> list[Any]:
    params = []
    for case in cases:
        for backend in BACKENDS:
            marks: list[Any] = [pytest.mark.docker] if backend == "docker" else []
            reason = case.weakness
            if backend == "local" and case.local_weakness and (not case.root_only_weakness or os.geteuid() == 0):
                reason = reason or f"local backend weakness: {case.local_weakness}"
            if reason:
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason))
            params.append(pytest.param(backend, case, id=f"{case.id}-{backend}", marks=marks))
    return params


@pytest.mark.parametrize(("backend", "case"), _params(attacks.GRADED_CASES), indirect=["backend"])
def test_hostile_notebook(backend: str, case: attacks.Case, host: Host, tmp_path: Path, fast_rubric: Path,
                          baselines: Baselines, template_cache: Path) -> None:
    baseline = baselines.get(backend, case.base)
    ctx = attacks.Ctx(token=host.token, mark=host.mark, port=host.port, victim=str(host.victim))
    name, content = attacks.build_case(case, ctx)
    hostile = nb.write(tmp_path / name, attacks.as_text(content))
    clean = nb.write(tmp_path / "next_student.ipynb", nb.build(case.base))
    cache = private_cache(tmp_path, host.token, template_cache)

    run = run_grader([hostile, clean], backend=backend, rubric=fast_rubric, seed=SEED, cwd=tmp_path,
                     token=host.token, cache=cache, timeout=case.runner_timeout)
    problems: list[str] = []

    # (3) the grader survived and answered for both notebooks
    if run.returncode != 0 or len(run.results) != 2:
        problems.append(f"the grader process did not finish the batch normally: {run.describe()}")
    attacked = run.results[0] if run.results else {}
    report = attacked.get("report")

    if report is None and not (case.may_refuse and attacked.get("error") == "SubmissionError"):
        problems.append(f"no report for the hostile notebook: {attacked or run.describe()}")
    if report is not None:
        got = statuses(report)
        # (1) no gain over the same implementation without the attack
        gained = sorted(passed(report) - passed(baseline))
        if gained:
            problems.append(f"the attack made checks pass that fail without it: {gained}")
        if report["score"] > baseline["score"]:
            problems.append(f"score {report['score']} is above the unattacked {baseline['score']}")
        if case.base == "buggy" and got.get("grad_accumulate") == "passed":
            problems.append("the buggy backward's grad_accumulate check passed")
        # (2) expected statuses, clear messages, bounded time
        for group, allowed in case.statuses.items():
            wrong = {c: got[c] for c in group if got.get(c) not in allowed}
            if wrong:
                problems.append(f"statuses {wrong}, expected one of {sorted(allowed)}")
        unclear = [c["id"] for c in report["checks"] if c["status"] != "passed" and not c["detail"].strip()]
        if unclear:
            problems.append(f"checks {unclear} did not pass but say nothing about why")
        if case.message is not None:
            details = "\n".join(c["detail"] for c in report["checks"] if c["status"] != "passed")
            if not re.search(case.message, details):
                problems.append(f"no feedback matches {case.message!r}; got:\n{details[:1500]}")
        if case.forbidden is not None and re.search(case.forbidden, json.dumps(report)):
            problems.append(f"the report holds {case.forbidden!r}: " + _find(report, case.forbidden))
        if canary(host.token) in repr(report):
            problems.append("a secret from the grader's environment appears in the report")
        if "tt-net-reached" in repr(report):
            problems.append("the notebook reached the network: " + _find(report, "tt-net-reached"))
        if case.render_check:
            problems += _rendering_problems(report)
        problems += _reload_problems(report)
    limit = min(case.max_seconds, GRADING_LIMIT_S)
    if attacked.get("seconds", 0.0) > limit:
        problems.append(f"grading took {attacked['seconds']:.1f} s (limit {limit:g} s)")

    # (3) the next student of the batch is graded exactly as without the attack
    if len(run.results) > 1:
        after = run.results[1].get("report")
        if after is None:
            problems.append(f"the next submission in the batch got no report: {run.results[1]}")
        elif statuses(after) != statuses(baseline):
            problems.append(f"the next submission in the batch was graded differently: "
                            f"{_diff(statuses(after), statuses(baseline))}")
    if case.persist:  # a new grader process, same caches, another job: nothing of the attack may remain
        again = run_grader([clean], backend=backend, rubric=fast_rubric, seed=SEED2, cwd=tmp_path,
                           token=host.token, cache=cache)
        after = again.report(0)
        if again.returncode != 0 or after is None:
            problems.append(f"a later grader process failed: {again.describe()}")
        elif statuses(after) != statuses(baselines.get(backend, case.base, SEED2)):
            problems.append(f"a later grader process grades the clean notebook differently: "
                            f"{_diff(statuses(after), statuses(baselines.get(backend, case.base, SEED2)))}")

    # (3) nothing escaped onto the host
    problems += _host_problems(host, tmp_path)
    assert not problems, f"{case.id} on {backend}:\n- " + "\n- ".join(problems)


def _host_problems(host: Host, tmp_path: Path) -> list[str]:
    problems = []
    left = leftover_processes(host.token)
    if left:
        problems.append(f"processes left running after grading: {left}")
    markers = marker_files(host.token, tmp_path)
    if markers:
        problems.append(f"files written outside the sandbox: {markers}")
    if host.connections():
        problems.append(f"the notebook connected to a listener on the host's 127.0.0.1:{host.port}")
    if not (host.victim / "keep.txt").exists():
        problems.append(f"the victim directory {host.victim} was deleted")
    return problems


def _reload_problems(report: dict[str, Any]) -> list[str]:
    """A report must load again from the JSON it is stored as (batch store, exports, the service)."""
    from pydantic import ValidationError

    from grader.models import GradeReport

    try:
        GradeReport.model_validate_json(GradeReport.model_validate(report).model_dump_json())
    except ValidationError as e:
        return [f"the report does not load again from its JSON: {str(e)[:300]}"]
    return []


def _rendering_problems(report: dict[str, Any]) -> list[str]:
    from rich.console import Console

    from grader.models import GradeReport
    from grader.report import render

    buf = io.StringIO()
    render(GradeReport.model_validate(report), Console(file=buf, force_terminal=False, color_system=None,
                                                       width=120), staff=True)
    text = buf.getvalue()
    bad = sorted({repr(ch) for ch in text if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) < 0xA0})
    return [f"the terminal report carries raw control characters {bad} from student text"] if bad else []


def _find(report: dict[str, Any], needle: str) -> str:
    for c in report["checks"]:
        if needle in c["detail"]:
            return str(c["detail"])[:300]
    return ""


def _diff(got: dict[str, str], want: dict[str, str]) -> dict[str, str]:
    return {k: f"{want.get(k)} -> {got.get(k)}" for k in sorted(set(got) | set(want)) if got.get(k) != want.get(k)}


# ---- intake: files that must be refused before anything runs ------------------------------------------


def _deep_json(tmp: Path) -> Path:
    return nb.write(tmp / "deep.ipynb", '{"cells": ' + "[" * 100_000 + "]" * 100_000 + "}")


def _many_cells(tmp: Path) -> Path:
    cell = '{"cell_type":"raw","metadata":{},"source":""}'
    text = '{"cells":[' + ",".join([cell] * 100_000) + '],"metadata":{},"nbformat":4,"nbformat_minor":4}'
    assert len(text) < 5 * 1024 * 1024  # under the size cap: the cell cap must catch it
    return nb.write(tmp / "many.ipynb", text)


def _symlink(tmp: Path) -> Path:
    real = nb.write(tmp / "real.ipynb", nb.build("correct"))
    link = tmp / "link.ipynb"
    link.symlink_to(real)
    return link


def _symlink_to_system_file(tmp: Path) -> Path:
    link = tmp / "passwd.ipynb"
    link.symlink_to("/etc/passwd")
    return link


def _directory(tmp: Path) -> Path:
    d = tmp / "folder.ipynb"
    d.mkdir()
    return d


def _fifo(tmp: Path) -> Path:
    p = tmp / "pipe.ipynb"
    os.mkfifo(p)
    return p


def _text(name: str, text: str | bytes) -> Any:
    return lambda tmp: nb.write(tmp / name, text)


def _invalid(**changes: Any) -> Any:
    def make(tmp: Path) -> Path:
        notebook = nb.build("correct")
        notebook.update(changes)
        return nb.write(tmp / "invalid.ipynb", notebook)

    return make


def _bad_cell(**changes: Any) -> Any:
    def make(tmp: Path) -> Path:
        notebook = nb.build("correct")
        cell = notebook["cells"][3]
        cell.update(changes)
        for key in [k for k, v in changes.items() if v is None]:
            del cell[key]
        return nb.write(tmp / "badcell.ipynb", notebook)

    return make


INTAKE = [
    ("malformed-bad-json", _text("bad.ipynb", '{"cells": [ {"cell_type": "code", '), r"not valid JSON", None),
    ("malformed-truncated-notebook", lambda tmp: _text("cut.ipynb", json.dumps(nb.build("correct"))[:5000])(tmp),
     r"not valid JSON", None),
    ("malformed-not-utf8", _text("latin.ipynb", b'{"cells": [], "x": "\xff\xfe"}'), r"UTF-8", None),
    ("malformed-nul-bytes", _text("nul.ipynb", b'{"cells": []}\x00'), r"NUL", None),
    ("malformed-cells-not-a-list", _invalid(cells={"0": "import os"}), r"notebook", None),
    ("malformed-nbformat-5", _invalid(nbformat=5), r"nbformat", None),
    ("malformed-cell-without-source", _bad_cell(source=None), r"not a valid notebook", None),
    ("malformed-unknown-cell-type", _bad_cell(cell_type="python"), r"not a valid notebook", None),
    ("malformed-100k-cells", _many_cells, r"cell", None),
    ("malformed-huge-line-over-size-cap", _text("huge.ipynb", '{"cells": [], "x": "' + "x" * (6 * 1024 * 1024) + '"}'),
     r"limit", None),
    ("malformed-deeply-nested-json", _deep_json, r"JSON|notebook",
     None),
    ("name-symlinked-notebook", _symlink, r"symbolic link", None),
    ("name-symlink-to-system-file", _symlink_to_system_file, r"symbolic link", None),
    ("name-directory-named-ipynb", _directory, r"directory", None),
    ("name-archive-or-unknown-suffix", _text("submission.zip", b"PK\x03\x04zip-slip ../../etc/x"),
     r"unsupported", None),
    ("name-fifo-named-ipynb", _fifo, r"regular file|not a file|FIFO|pipe|notebook",
     None),
]


def _intake_params() -> list[Any]:
    params = []
    for case_id, make, message, weakness in INTAKE:
        for backend in BACKENDS:
            marks: list[Any] = [pytest.mark.docker] if backend == "docker" else []
            if weakness:
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError, reason=weakness))
            params.append(pytest.param(backend, make, message, id=f"{case_id}-{backend}", marks=marks))
    return params


_INTAKE_GRADERS: dict[str, Any] = {}


@pytest.mark.parametrize(("backend", "make", "message"), _intake_params(), indirect=["backend"])
def test_refused_at_intake(backend: str, make: Any, message: str, tmp_path: Path, fast_rubric: Path) -> None:
    """Malformed files and hostile names end in a one-line SubmissionError, quickly, before any sandbox."""
    from grader import Grader, SubmissionError

    if backend not in _INTAKE_GRADERS:
        _INTAKE_GRADERS[backend] = Grader(fast_rubric, backend, seed=SEED)
    grader = _INTAKE_GRADERS[backend]
    path = make(tmp_path)
    outcome: dict[str, BaseException | object] = {}

    def attempt() -> None:
        try:
            outcome["report"] = grader.grade(path)
        except BaseException as e:  # any escape is part of what is checked
            outcome["error"] = e

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(4)
    hung = worker.is_alive()
    if hung and path.is_fifo():  # unblock the reader so the thread can end
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
    assert not hung, f"grading {path.name} did not return within 4 s"
    error = outcome.get("error")
    assert isinstance(error, SubmissionError), f"expected SubmissionError, got {outcome!r}"
    text = str(error)
    assert "\n" not in text.strip() and len(text) < 500, f"not a clear one-line message: {text!r}"
    assert re.search(message, text), f"message {text!r} does not match {message!r}"


@pytest.fixture(scope="module", autouse=True)
def _close_intake_graders() -> Any:
    yield
    for grader in _INTAKE_GRADERS.values():
        close = getattr(grader, "close", None)
        if close is not None:
            close()
    _INTAKE_GRADERS.clear()
