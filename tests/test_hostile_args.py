"""Every subcommand walked with hostile paths and values: each ends in exit 2 with an error line on
stderr and no traceback, in-process and, for the grading front ends, through the warm daemon."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.results.store import SQLiteStore
from grader.rubric import load_rubric

from .conftest import SUBMISSIONS

NB = str(SUBMISSIONS / "correct_tinytorch.ipynb")


@pytest.fixture(scope="module")
def places(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Hostile places: a folder, a file, an empty file, a missing path, a path under a file, a
    path no one may write; a class folder and a RESULTS_DIR to aim them at."""
    root = tmp_path_factory.mktemp("hostile")
    (root / "folder").mkdir()
    (root / "file.csv").write_text("student_id,name\na1,Ann\n")
    (root / "empty.ipynb").write_bytes(b"")
    (root / "empty.csv").write_bytes(b"")
    (root / "class").mkdir()
    (root / "class" / "a1.ipynb").write_bytes(Path(NB).read_bytes())
    (root / "nothing").mkdir()
    with SQLiteStore(root / "results") as store:
        store.set_meta("rubric", load_rubric().model_dump_json())
    return {"dir": str(root / "folder"), "file": str(root / "file.csv"), "empty": str(root / "empty.ipynb"),
            "empty_csv": str(root / "empty.csv"), "missing": str(root / "missing.ipynb"),
            "under_file": str(root / "file.csv" / "x.json"), "proc": "/proc/grader-hostile/x.json",
            "class": str(root / "class"), "nothing": str(root / "nothing"), "results": str(root / "results"),
            "out": str(root / "out"), "long": str(root / ("n" * 300))}


GRADE = [
    ["grade", "{dir}"], ["grade", "{empty}"], ["grade", "{missing}"], ["grade", NB, "--json", "{proc}"],
    ["grade", NB, "--json", "{dir}"], ["grade", NB, "--json", "{under_file}"], ["grade", NB, "--seed", "-5"],
    ["grade", NB, "--seed", "x"], ["grade", NB, "--rubric", "{dir}"], ["grade", NB, "--rubric", "{empty}"],
    ["grade", NB, "--rubric", "{missing}"], ["grade", NB, "--due-date", "soon"], ["grade", NB, "--module", "../x"],
    ["grade", NB, "--bogus"], ["grade", NB, "--backend", "vm"],
]
OTHERS = [
    ["batch", "{class}", "--out", "{proc}"], ["batch", "{class}", "--out", "{file}"],
    ["batch", "{class}", "--out", "{out}", "--workers", "0"], ["batch", "{class}", "--out", "{out}", "--workers", "-1"],
    ["batch", "{class}", "--out", "{out}", "--roster", "{dir}"],
    ["batch", "{class}", "--out", "{out}", "--roster", "{empty_csv}"],
    ["batch", "{class}", "--out", "{out}", "--roster", "{missing}"], ["batch", "{nothing}", "--out", "{out}"],
    ["batch", "{missing}", "--out", "{out}"], ["batch", "{empty}", "--out", "{out}"],
    ["batch", "{class}", "--out", "{out}", "--rubric", "{dir}"], ["batch", "{class}", "--out", "{out}", "--due-date", "x"],
    ["batch", "{class}", "--out", "{out}", "--keep", "some"], ["batch", "{class}", "--out", "{out}", "--backend", "vm"],
    ["export", "{missing}", "--format", "csv"], ["export", "{file}", "--format", "csv"],
    ["export", "{results}", "--format", "csv", "--out", "{proc}"],
    ["export", "{results}", "--format", "canvas", "--out", "{under_file}"],
    ["export", "{results}", "--format", "csv", "--roster", "{dir}"],
    ["export", "{results}", "--format", "csv", "--roster", "{empty_csv}"], ["export", "{results}", "--format", "xls"],
    ["gradescope", "--root", "{proc}"], ["gradescope", "--root", "{file}"], ["gradescope", "--root", "{missing}"],
    ["selftest", "--mutants", "{dir}", "--list"], ["selftest", "--mutants", "{missing}", "--list"],
    ["selftest", "--mutants", "--jobs", "0", "--list"], ["selftest", "--mutants", "--rubric", "{dir}", "--list"],
    ["image", "build", "--bogus"], ["image", "push"], ["cleanup", "--bogus"], ["daemon", "restart"], ["--bogus"], [],
    # names too long for the file system, dates and ids that are not, and every service option
    ["batch", "{long}", "--out", "{out}"], ["batch", "{class}", "--out", "{long}"], ["export", "{long}", "--format", "csv"],
    ["gradescope", "--root", "{long}"], ["export", "{results}", "--format", "nbgrader", "--due-date", "garbage"],
    ["export", "{results}", "--format", "canvas", "--canvas-assignment-id", "abc"],
    ["export", "{results}", "--format", "canvas", "--canvas-assignment-id", "-5"],
    ["selftest", "--mutants", "--equivalents", "{missing}", "--list"],
    ["serve", "--port", "-1"], ["serve", "--port", "99999"], ["serve", "--data", "{file}"],
    ["serve", "--database", "notaurl"], ["serve", "--broker", "notaurl"], ["serve", "--workers", "0"],
    ["serve", "--workers", "-2"], ["serve", "--add-staff", ""],
    ["worker", "--broker", "notaurl", "--database", "sqlite:///x.sqlite"],
    ["worker", "--broker", "redis://127.0.0.1:9/0", "--database", "notaurl"],
    ["worker", "--broker", "redis://127.0.0.1:9/0", "--database", "sqlite:///x.sqlite", "--concurrency", "-1"],
]
TITO = [
    ["test", "--module", "embeddings", "--notebook", "{dir}"], ["test", "--module", "embeddings", "--notebook", "{empty}"],
    ["test", "--module", "embeddings", "--notebook", "{missing}"],
    ["test", "--module", "embeddings", "--notebook", NB, "--rubric", "{dir}"],
    ["test", "--module", "no_such_module", "--notebook", NB],
]


def fill(argv: list[str], places: dict[str, str]) -> list[str]:
    return [a.format(**places) for a in argv]


def assert_clean_usage_error(code: int | None, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err and "error:" in err
    assert all(line.strip() for line in err.strip().splitlines()[-1:])  # ends with the error line itself


def run_main(main: object, argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int | None, str]:
    try:
        code = main(argv, use_daemon=False)  # type: ignore[operator]
    except SystemExit as e:  # argparse's usage errors
        code = e.code if isinstance(e.code, int) else 2
    return code, capsys.readouterr().err


@pytest.mark.parametrize("argv", GRADE + OTHERS, ids=lambda a: " ".join(a) or "(nothing)")
def test_grader_subcommands_refuse_hostile_input_cleanly(argv: list[str], places: dict[str, str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    from grader.cli import main

    code, err = run_main(main, fill(argv, places), capsys)
    assert_clean_usage_error(code, err)
    assert not Path("/proc/grader-hostile").exists()


@pytest.mark.parametrize("argv", TITO, ids=lambda a: " ".join(a))
def test_tito_refuses_hostile_input_cleanly(argv: list[str], places: dict[str, str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from grader.tito import main

    code, err = run_main(main, fill(argv, places), capsys)
    assert_clean_usage_error(code, err)


def test_the_usage_line_names_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    import re

    from grader.cli import main

    usages = []
    for argv in (["--bogus"], ["grade", NB, "--bogus"]):  # `grade` builds a lighter command line: same usage
        code, err = run_main(main, argv, capsys)
        found = re.search(r"\{([a-z,]+)\}", err)
        assert code == 2 and found is not None
        usages.append(set(found.group(1).split(",")))
    assert usages[0] == usages[1] and {"grade", "batch", "export", "gradescope", "selftest", "daemon"} <= usages[0]


@pytest.fixture
def daemon_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "GRADER_CACHE": str(tmp_path / "cache"), "GRADER_DAEMON_IDLE_S": "60"}
    env.pop("GRADER_NO_DAEMON", None)
    yield env
    subprocess.run([sys.executable, "-m", "grader.cli", "daemon", "stop"], env=env, capture_output=True, timeout=30)


@pytest.mark.slow
def test_hostile_grading_requests_through_the_daemon(daemon_env: dict[str, str], places: dict[str, str]) -> None:
    def run(module: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", module, *fill(argv, places)], env=daemon_env,
                              capture_output=True, text=True, timeout=120)

    assert run("grader.cli", ["grade", NB]).returncode == 0  # in-process; starts the daemon
    sockets = Path(daemon_env["GRADER_CACHE"]) / "daemon"
    deadline = time.monotonic() + 30
    while not list(sockets.glob("*.sock")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(sockets.glob("*.sock")), "the first run should start a daemon"
    for module, argv in [*(("grader.cli", a) for a in GRADE), *(("grader.tito", a) for a in TITO)]:
        done = run(module, argv)
        assert done.returncode == 2, (argv, done.stderr)
        assert "Traceback" not in done.stderr and "error:" in done.stderr, (argv, done.stderr)
    assert list(sockets.glob("*.sock")), "the daemon still serves after every hostile request"


# ---- as an ordinary user: folders this user may not read or write ------------------------------------


def as_ordinary_user(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``grader ARGV`` without the powers that let root read and write anything: as root, with
    CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH and CAP_FOWNER dropped (file modes then bind it as they
    bind any user); as an ordinary user, as it is."""
    command = [sys.executable, "-m", "grader.cli", *argv]
    if os.geteuid() == 0:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--", *command]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def shut(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A class folder this user may not read, and results folders it may not read, or only read."""
    root = tmp_path_factory.mktemp("shut")
    (root / "class").mkdir()
    (root / "class" / "a1.ipynb").write_bytes(Path(NB).read_bytes())
    for name in ("results_ro", "results_shut"):
        with SQLiteStore(root / name) as store:
            store.set_meta("rubric", load_rubric().model_dump_json())
    (root / "data_ro").mkdir()
    (root / "autograder").mkdir()
    modes = {"class": 0o000, "results_ro": 0o555, "results_shut": 0o000, "data_ro": 0o555, "autograder": 0o000}
    for name, mode in modes.items():
        (root / name).chmod(mode)
    (root / "results_ro" / SQLiteStore.FILE).chmod(0o444)
    yield {name: str(root / name) for name in modes} | {"elsewhere": str(root / "grades.csv")}
    for name in modes:
        (root / name).chmod(0o755)


@pytest.mark.parametrize("argv", [
    ["batch", "{class}", "--out", "{elsewhere}.d"], ["export", "{results_shut}", "--format", "csv"],
    ["export", "{results_ro}", "--format", "csv"], ["gradescope", "--root", "{autograder}"],
    ["serve", "--data", "{data_ro}"], ["serve", "--data", "{results_shut}"],
], ids=lambda a: " ".join(a))
def test_as_an_ordinary_user_a_folder_it_may_not_use_is_a_clean_error(argv: list[str], shut: dict[str, str]) -> None:
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.fail("setpriv (util-linux) is needed to test as an ordinary user while root")
    run = as_ordinary_user(fill(argv, shut))
    assert_clean_usage_error(run.returncode, run.stderr)


def test_a_ta_exports_a_results_folder_it_may_only_read(shut: dict[str, str]) -> None:
    run = as_ordinary_user(["export", shut["results_ro"], "--format", "csv", "--out", shut["elsewhere"]])
    assert run.returncode == 0, run.stderr
    assert Path(shut["elsewhere"]).read_text(encoding="utf-8").startswith("student_id,")
