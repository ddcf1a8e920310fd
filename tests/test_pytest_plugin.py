"""The pytest plugin, tested the way pytest plugins test themselves: a real pytest in a subprocess.

Most runs disable plugin autoloading and load the plugin with ``-p`` (other plugins installed in a
developer's environment can take seconds to import); the entry point itself is covered by
``test_loaded_through_its_entry_point_and_inert_without_a_submission``.
"""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from .conftest import EMBEDDINGS_RUBRIC, SUBMISSIONS

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module

pytest_plugins = ["pytester"]

GOLDEN = Path(__file__).parent / "golden"
BUGGY = "bug_backward_overwrite.ipynb"  # fails grad_accumulate (visible) and grad_batch (hidden)

Run = Callable[..., pytest.RunResult]


@pytest.fixture
def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Run:
    """``run(*args)``: pytest in a subprocess with only this plugin loaded."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")

    def runner(*args: str | Path) -> pytest.RunResult:
        return pytester.runpytest_subprocess("-p", "grader.pytest_plugin", "-p", "no:cacheprovider",
                                             *map(str, args), timeout=120)

    return runner


def submission(pytester: pytest.Pytester, name: str, dest: str | None = None) -> Path:
    target = pytester.path / (dest or name)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(SUBMISSIONS / name, target)
    return target


def test_registered_as_a_pytest11_entry_point() -> None:
    plugins = {e.name: e.value for e in entry_points(group="pytest11")}
    assert plugins.get("tinytorch_grader") == "grader.pytest_plugin", "reinstall: pip install -e ."


def test_loaded_through_its_entry_point_and_inert_without_a_submission(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain="""
        import sys

        def test_grader_stays_unimported():
            loaded = sorted(m for m in sys.modules if m == "grader" or m.startswith("grader."))
            assert loaded == ["grader", "grader.edition", "grader.pytest_plugin"], loaded  # edition: constants only
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-v", timeout=120)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["plugins:*tinytorch-grader*", "*test_plain.py::test_grader_stays_unimported PASSED*"])
    result.stdout.no_fnmatch_line("*grading:*")
    result.stdout.no_fnmatch_line("*- grade -*")


def test_a_buggy_submission_one_item_per_check_feedback_points_and_junit(run: Run, pytester: pytest.Pytester) -> None:
    golden = json.loads((GOLDEN / f"{BUGGY}.json").read_text(encoding="utf-8"))
    checks = golden["checks"]
    passed = sum(c["status"] == "passed" for c in checks)
    sub = submission(pytester, BUGGY)
    result = run("--grade", sub, "-v", "--junitxml", "junit.xml")

    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=passed, failed=len(checks) - passed)
    result.stdout.fnmatch_lines([f"{BUGGY}::{c['id']} {c['status'].upper()} {c['score']:g}/{c['max_score']:g}*"
                                 for c in checks])
    result.stdout.fnmatch_lines([
        "grad_accumulate failed, 0/8 points: Repeated tokens accumulate their gradients",
        "Called: Embedding(4, 2) backward*",
        "Likely cause: row 0 received 1x the gradient instead of 2x*",
        "grad_batch failed, 0/3 points: *",
        "Did not pass. Its details are for the course staff only.",  # the student-safe message, not the staff detail
        f"module 11 embeddings: {golden['score']:g}/{golden['max_score']:g} ({passed}/{len(checks)} checks)",
        "practice run (local backend)*",
    ])
    out = result.stdout.str()
    for noise in ("Traceback", "CheckFailed", "pytest_plugin.py", "def runtest"):
        assert noise not in out

    cases = {case.get("name", ""): case for case in ET.parse(pytester.path / "junit.xml").getroot().iter("testcase")}
    assert sorted(cases) == sorted(c["id"] for c in checks)
    for check in checks:
        props = {p.get("name"): p.get("value") for p in cases[check["id"]].iter("property")}
        assert props == {"points": f"{check['score']:g}", "max_points": f"{check['max_score']:g}",
                         "status": check["status"]}, check["id"]


def test_k_selects_checks_and_the_summary_counts_only_those(run: Run, pytester: pytest.Pytester) -> None:
    result = run("--grade", submission(pytester, BUGGY), "-k", "emb_ and not xavier")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=7, deselected=23)
    result.stdout.fnmatch_lines(["module 11 embeddings: 24/24 (7/7 checks)"])


def test_x_stops_at_the_first_failed_check(run: Run, pytester: pytest.Pytester) -> None:
    result = run("--grade", submission(pytester, BUGGY), "-x")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=8, failed=1)  # grad_accumulate is the ninth check


def test_visibility_markers_select_checks_without_grading(run: Run, pytester: pytest.Pytester) -> None:
    sub = submission(pytester, BUGGY)
    hidden = run("--grade", sub, "--collect-only", "-q", "-m", "hidden", "--strict-markers")
    hidden.stdout.fnmatch_lines([f"{BUGGY}::grad_batch", "1/30 tests collected (29 deselected)*"])
    public = run("--grade", sub, "--collect-only", "-q", "-m", "not hidden and not after_due_date")
    public.stdout.fnmatch_lines(["28/30 tests collected (2 deselected)*"])
    public.stdout.no_fnmatch_line("*::grad_batch")
    public.stdout.no_fnmatch_line("*- grade -*")  # collecting does not grade


def test_module_finds_the_students_notebook_in_a_tinytorch_checkout(run: Run, pytester: pytest.Pytester) -> None:
    submission(pytester, "correct_tinytorch.ipynb", "modules/11_embeddings/11_embeddings.ipynb")
    (pytester.path / "src" / "01_tensor").mkdir(parents=True)
    pytester.makepyfile(**{"tests/test_course.py": "def test_unrelated():\n    assert False\n"})
    pytester.makeini("[pytest]\ntestpaths = tests\n")
    result = run("--module", "11")
    assert result.ret == pytest.ExitCode.OK
    result.assert_outcomes(passed=30)  # the course's own tests (testpaths) are not collected
    result.stdout.fnmatch_lines(["grading: *11_embeddings.ipynb as module 11 embeddings*",
                                 "module 11 embeddings: 100/100 (30/30 checks)"])


def test_ini_twins_name_the_submission_and_are_validated(run: Run, pytester: pytest.Pytester) -> None:
    submission(pytester, BUGGY, "work/student.ipynb")
    pytester.makeini("[pytest]\ngrade_path = work/student.ipynb\ngrade_module = embeddings\ngrade_backend = local\n")
    result = run("--collect-only", "-q")
    result.stdout.fnmatch_lines(["work/student.ipynb::emb_shape", "30 tests collected*"])
    pytester.makeini("[pytest]\ngrade_path = work/student.ipynb\ngrade_backend = vm\n")
    bad = run("--collect-only")
    assert bad.ret == pytest.ExitCode.USAGE_ERROR
    bad.stderr.fnmatch_lines(["ERROR: invalid backend 'vm' from grade_backend in *tox.ini: choose local or docker"])


def test_a_py_submission_is_graded_not_imported(run: Run, pytester: pytest.Pytester) -> None:
    sub = submission(pytester, "correct_source.py", "src/11_embeddings/11_embeddings.py")
    result = run("--grade", sub, "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK  # importing it would fail: its tinytorch is not importable here
    result.stdout.fnmatch_lines(["src/11_embeddings/11_embeddings.py::emb_shape", "30 tests collected*"])


def test_a_missing_module_is_a_usage_error_naming_where_it_looked(run: Run, pytester: pytest.Pytester) -> None:
    submission(pytester, "correct_tinytorch.ipynb", "modules/11_embeddings/11_embeddings.ipynb")
    result = run("--module", "attention")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: no module attention in *: looked for modules/NN_attention/*.ipynb and "
                                 "src/NN_attention/NN_attention.py; modules there: 11_embeddings; or pass --grade PATH"])


@pytest.mark.usefixtures("no_standing_module")
def test_an_unreadable_submission_is_one_collection_error_without_traceback(run: Run, pytester: pytest.Pytester) -> None:
    (pytester.path / "broken.ipynb").write_text("{oops", encoding="utf-8")
    result = run("--grade", "broken.ipynb", "--module", "embeddings")
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["broken.ipynb: not valid JSON*", "*1 error*"])
    assert "Traceback" not in result.stdout.str()
    # with two units installed and no --module, the file's own problem is what says no module can grade it
    alone = run("--grade", "broken.ipynb")
    assert alone.ret == pytest.ExitCode.USAGE_ERROR
    alone.stderr.fnmatch_lines(["ERROR: broken.ipynb: not valid JSON*"])
    assert "Traceback" not in alone.stderr.str() + alone.stdout.str()


def test_an_unavailable_backend_is_a_usage_error(run: Run, pytester: pytest.Pytester,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-engine.sock")
    result = run("--grade", submission(pytester, BUGGY), "--backend", "docker")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: backend 'docker': *"])
    assert "Traceback" not in result.stderr.str()


# ---- scoring settings come from the course, never from the graded repository -----------------


def one_check_rubric(path: Path) -> Path:
    """A rubric that gives all 100 points to emb_shape: what a student would like to be graded with."""
    import re

    text = EMBEDDINGS_RUBRIC.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^points = \d+", "points = 0", text).replace("points = 0", "points = 100", 1)  # emb_shape
    path.write_text(text.replace('id = "tinytorch-11-embeddings"', 'id = "mine"'), encoding="utf-8")
    return path


@pytest.mark.parametrize("ini", [
    pytest.param("[pytest]\ngrade_rubric = evil.toml\n", id="ini-twin"),
    pytest.param("[pytest]\naddopts = --rubric evil.toml\n", id="ini-addopts"),
    pytest.param("[pytest]\ngrade_rubric = ./evil\n", id="path-without-suffix"),
])
def test_a_rubric_file_named_by_the_repository_is_refused(run: Run, pytester: pytest.Pytester, ini: str) -> None:
    one_check_rubric(pytester.path / "evil.toml")
    one_check_rubric(pytester.path / "evil")
    sub = submission(pytester, BUGGY)
    pytester.makeini(ini)
    result = run("--grade", sub)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: rubric *evil* from * in *tox.ini*: settings in the graded repository may "
                                 "only select an installed rubric by id (e.g. grade_rubric = <rubric id>), "
                                 "never a file; the course passes a rubric file with --rubric on the command line"])
    assert "passed" not in result.stdout.str() and "100/100" not in result.stdout.str()


def test_the_repository_may_select_an_installed_rubric_by_id_and_hash(run: Run, pytester: pytest.Pytester) -> None:
    from grader.rubric import load_rubric

    rubric = load_rubric(module="embeddings")
    points = next(c.points for c in rubric.checks if c.id == "emb_shape")
    sub = submission(pytester, BUGGY)
    pytester.makeini(f"[pytest]\ngrade_rubric = {rubric.id}@sha256:{rubric.sha256[:16]}\n")
    result = run("--grade", sub, "-k", "emb_shape")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines([f"grading: * with rubric {rubric.id}@sha256:{rubric.sha256[:12]} *",
                                 f"module 11 embeddings: {points:g}/{points:g} (1/1 checks)"])
    pytester.makeini(f"[pytest]\ngrade_rubric = {rubric.id}@sha256:{'0' * 16}\n")  # another version of it
    wrong = run("--grade", sub, "--collect-only")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    wrong.stderr.fnmatch_lines([f"ERROR: no installed rubric is '{rubric.id}@sha256:{'0' * 16}' "
                                f"(installed: *{rubric.id}@sha256:{rubric.sha256[:12]}*)"])


def test_the_course_command_line_may_still_pass_a_rubric_file(run: Run, pytester: pytest.Pytester) -> None:
    evil = one_check_rubric(pytester.path / "course-rubric.toml")
    result = run("--grade", submission(pytester, BUGGY), "--rubric", evil)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["grading: * with rubric mine@sha256:*", "module 11 embeddings: 100/100 (*/* checks)"])


def test_the_repository_names_no_submission_outside_itself(run: Run, pytester: pytest.Pytester) -> None:
    other = submission(pytester, "correct_tinytorch.ipynb", "classmate/11_embeddings.ipynb")
    repo = pytester.path / "mine"
    repo.mkdir()
    (repo / "tox.ini").write_text(f"[pytest]\ngrade_path = ../classmate/{other.name}\n", encoding="utf-8")
    result = run("--collect-only", "--rootdir", repo, "-c", repo / "tox.ini")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: '../classmate/11_embeddings.ipynb' from grade_path in *tox.ini is outside *mine: "
                                 "a repository's settings may only name a submission inside it; pass --grade PATH on "
                                 "the command line"])
