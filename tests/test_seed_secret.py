"""The course's seed secret (grader.secret): official grading never uses the public default that
ships in every wheel; batch and the service make a secret of their own on first use; practice runs
need none."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from grader import Grader
from grader.errors import GraderError, NoCourseSecret
from grader.secret import FILE, PRACTICE_SECRET
from grader.session import Session
from grader.settings import reload

from .conftest import SUBMISSIONS

CORRECT = SUBMISSIONS / "correct_tinytorch.ipynb"


def without_secret() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "GRADER_SEED_SECRET"}
    return env


def cli(*args: str | Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "grader.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


@pytest.fixture
def no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRADER_SEED_SECRET", raising=False)
    reload()


def test_a_practice_run_needs_no_secret(no_secret: None) -> None:
    with Session() as session:
        assert session.grade(CORRECT).score == 100


@pytest.mark.parametrize("given", [None, PRACTICE_SECRET.decode()], ids=["unset", "public-default"])
def test_an_official_grader_refuses_without_the_courses_own_secret(monkeypatch: pytest.MonkeyPatch,
                                                                   given: str | None) -> None:
    if given is None:
        monkeypatch.delenv("GRADER_SEED_SECRET", raising=False)
    else:
        monkeypatch.setenv("GRADER_SEED_SECRET", given)
    reload()
    with Session(official=True) as session, pytest.raises(NoCourseSecret, match="GRADER_SEED_SECRET"):
        session.grader()
    with pytest.raises(NoCourseSecret):
        Grader(official=True)
    with Session(official=True) as session:  # the course's own is taken
        assert session.grader(seed_secret=b"the course's own").seed_secret == b"the course's own"


def test_batch_makes_a_course_secret_on_first_use_keeps_it_private_and_reuses_it(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "ann.ipynb").write_bytes(CORRECT.read_bytes())
    env = without_secret()
    first = cli("batch", source, "--out", tmp_path / "r", env=env)
    assert first.returncode == 0, first.stderr
    kept = tmp_path / "r" / FILE
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    value = kept.read_bytes()
    assert len(value.strip()) == 64 and value.strip() != PRACTICE_SECRET
    assert cli("batch", source, "--out", tmp_path / "r", "--force", env=env).returncode == 0
    assert kept.read_bytes() == value  # the same course secret, so the same hidden inputs
    assert cli("batch", source, "--out", tmp_path / "r2", env=env).returncode == 0
    assert (tmp_path / "r2" / FILE).read_bytes() != value  # random, not derived from anything public
    for name in ("summary.json", "summary.html"):
        assert value.strip().decode() not in (tmp_path / "r" / name).read_text(encoding="utf-8")
    for page in (tmp_path / "r" / "feedback").iterdir():
        assert value.strip().decode() not in page.read_text(encoding="utf-8")


def test_batch_refuses_the_public_default_with_the_fix(tmp_path: Path) -> None:
    source = tmp_path / "in"
    source.mkdir()
    (source / "ann.ipynb").write_bytes(CORRECT.read_bytes())
    run = cli("batch", source, "--out", tmp_path / "r", env={**without_secret(), "GRADER_SEED_SECRET": "tinytorch-grader"})
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert "public default" in run.stderr and "GRADER_SEED_SECRET" in run.stderr
    assert not (tmp_path / "r" / "results.sqlite").exists() or run.stdout.count("graded") == 0


def test_gradescope_mode_without_a_secret_grades_nothing_and_says_why(tmp_path: Path) -> None:
    from .test_gradescope_mode import autograder_root

    root = autograder_root(tmp_path, notebook="correct_tinytorch.ipynb")
    env = {**without_secret(), "GRADER_AUTOGRADER_ROOT": str(root), "GRADER_PYTHON": sys.executable}
    done = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    results = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    assert results["extra_data"]["status"] == "failed_to_grade", results
    assert "seed secret" in done.stdout and "Traceback" not in done.stderr, done.stdout  # the staff log
    (root / "source" / "seed_secret").write_text("course-secret-1234\n", encoding="utf-8")
    done = subprocess.run(["bash", str(root / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["score"] == 100.0


def test_the_service_refuses_to_start_on_the_public_default(tmp_path: Path) -> None:
    env = {**without_secret(), "GRADER_SEED_SECRET": "tinytorch-grader"}
    for command in (["serve", "--data", tmp_path / "data", "--port", "0"],
                    ["worker", "--broker", "redis://127.0.0.1:9/0", "--database", f"sqlite:///{tmp_path}/w.sqlite"]):
        run = cli(*command, env=env)
        assert run.returncode == 2 and "public default" in run.stderr and "Traceback" not in run.stderr, run.stderr


def test_the_service_grades_with_a_secret_of_its_own_kept_in_its_store(tmp_path: Path, no_secret: None) -> None:
    from fastapi.testclient import TestClient
    from sqlalchemy import select

    from grader.results.tables import Meta
    from grader.service.app import create_app
    from grader.service.ops import SEED_SECRET_KEY
    from grader.service.settings import ServiceSettings

    from .service.conftest import make_course

    settings = ServiceSettings(data_dir=tmp_path / "data", workers=1, official=True, hostname="embedded@test")
    printed: list[str] = []
    with TestClient(create_app(settings, announce=printed.append)) as client:
        course = make_course(client, printed[0].rsplit(" ", 1)[1])
        sid = course.upload("alice", CORRECT).json()["id"]
        assert course.wait(sid, "alice")["status"] == "graded"
        result = course.result(sid, "staff").text
        db = client.app.state.db  # type: ignore[attr-defined]
        stored = db.run(lambda s: s.scalar(select(Meta.value).where(Meta.key == SEED_SECRET_KEY)))
    assert stored and len(stored) == 64 and stored not in result


def test_an_unreadable_secret_file_is_an_error_with_the_fix(tmp_path: Path, no_secret: None) -> None:
    from grader.secret import folder_secret

    (tmp_path / FILE).write_text("", encoding="utf-8")
    with pytest.raises(GraderError, match="does not hold a seed secret"):
        folder_secret(tmp_path)
    (tmp_path / "file").write_text("x", encoding="utf-8")
    with pytest.raises(GraderError, match="cannot be kept in"):
        folder_secret(tmp_path / "file")


def test_gradescope_mode_reads_the_zips_secret_itself(tmp_path: Path) -> None:
    """Run without run_autograder (which exports it): the mode reads source/seed_secret itself."""
    from .test_gradescope_mode import autograder_root

    root = autograder_root(tmp_path, notebook="correct_tinytorch.ipynb")
    (root / "source" / "seed_secret").write_text("course-secret-1234\n", encoding="utf-8")
    run = subprocess.run([sys.executable, "-m", "grader.gradescope_mode", "--root", str(root)], env=without_secret(),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))["score"] == 100.0
