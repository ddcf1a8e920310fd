"""Shared fixtures: an isolated cache and a fixed seed secret, so runs are reproducible."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.unittesting import code_cells as code_cells  # the suite's tests import them from here
from grader.unittesting import write_notebook as write_notebook

ROOT = Path(__file__).resolve().parents[1]
SUBMISSIONS = ROOT / "submissions"
EMBEDDINGS_RUBRIC = ROOT / "grader" / "modules" / "embeddings" / "rubric.toml"
TOY_UNIT = ROOT / "tests" / "units" / "toy_relu"  # a second course-module unit, installed by ``toy_site``


def _import_the_grader_now() -> None:
    """Import every grader module before any test runs. pytest rewrites the asserts of a plugin's
    whole distribution (the grader is one, through pytest11), parsing each module with ast when it
    is first imported; CPython 3.11 keeps ast's recursion bookkeeping per interpreter, so a lazy
    import in the main thread while a grading thread of an earlier test parses a notebook fails
    with "AST constructor recursion depth mismatch"."""
    import importlib
    import pkgutil

    import grader

    for info in pkgutil.walk_packages(grader.__path__, "grader."):
        if info.name.endswith(("__main__", ".migrations.env")) or ".versions." in info.name:
            continue  # scripts: run, never imported
        if ".tests" in info.name:
            continue  # a unit's own tests: pytest collects them
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue


_import_the_grader_now()


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    mp = pytest.MonkeyPatch()
    mp.setenv("GRADER_CACHE", str(tmp_path_factory.mktemp("grader-cache")))
    mp.setenv("GRADER_SEED_SECRET", "tests")
    # The grader ships two units (modules 11 and 12), so a notebook that names no module is graded by
    # the machine's standing default: module 11 here, as the suite's module-11 tests expect. Tests of
    # the choice itself pass their own environ (tests/test_choose.py) or drop it from a child's env.
    mp.setenv("GRADER_MODULE", "embeddings")
    mp.setenv("GRADER_NO_DAEMON", "1")  # tests run in-process; tests/test_daemon.py turns it on
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _fresh_settings() -> Iterator[None]:
    """The grader reads GRADER_* once per process; a test that changes them gets them re-read."""
    from grader.settings import reload

    reload()
    yield
    reload()


@pytest.fixture(scope="session")
def grader_local() -> Iterator[Any]:
    from grader import Grader

    with Grader(EMBEDDINGS_RUBRIC, backend="local") as g:
        yield g


def fast_rubric_file(directory: Path, timeout_s: float, import_timeout_s: float, total_timeout_s: float) -> Path:
    """The module-11 rubric with its timeouts cut down, so that hanging submissions end in seconds."""
    import re

    text = EMBEDDINGS_RUBRIC.read_text(encoding="utf-8")
    for key, value in (("timeout_s", timeout_s), ("import_timeout_s", import_timeout_s),
                       ("total_timeout_s", total_timeout_s)):
        text = re.sub(rf"(?m)^{key}\s*=.*$", f"{key} = {value}", text)
    path = directory / "embeddings-fast.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _clear_caches() -> None:
    from grader import modules
    from grader.sandbox import bundle

    modules.installed.cache_clear()
    bundle.ensure_bundle.cache_clear()


@contextlib.contextmanager
def unit_installed(site: Path, unit_dir: Path = TOY_UNIT, entry: str = "relu = toy_relu:UNIT") -> Iterator[Path]:
    """A unit's folder installed in ``site`` the way a course's own distribution would be: its
    package and a dist-info whose entry point names it, on sys.path until the block ends."""
    from grader import modules

    package = entry.split("=", 1)[1].strip().split(":")[0].split(".")[0]
    shutil.copytree(unit_dir, site / package, ignore=shutil.ignore_patterns("__pycache__"))
    info = site / f"{package}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{modules.GROUP}]\n{entry}\n", encoding="utf-8")
    sys.path.insert(0, str(site))
    _clear_caches()
    try:
        yield site
    finally:
        sys.path.remove(str(site))
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
        _clear_caches()


@pytest.fixture(scope="module")
def toy_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The toy unit installed as a course's own distribution would be: a package and a dist-info
    whose entry point names it. With it the suite has two units, as a course does."""
    with unit_installed(tmp_path_factory.mktemp("site")) as site:
        mp = pytest.MonkeyPatch()  # and in every process a test starts
        mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
        yield site
        mp.undo()


@pytest.fixture
def no_standing_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No GRADER_MODULE (the suite's standing default is module 11), for tests of what happens when
    nothing names the module; the environment's settings are read again before and after."""
    from grader import settings

    monkeypatch.delenv("GRADER_MODULE", raising=False)
    settings.reload()
    yield
    monkeypatch.undo()
    settings.reload()
