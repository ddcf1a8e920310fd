"""The shared course runtime is named and versioned (grader/runtime.py, docs/NEW_MODULE.md): its
recorded hash follows its code, and a unit runs only on a version it was written for."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import modules, runtime
from grader.errors import ModuleUnitError

from .conftest import unit_installed


@pytest.mark.parametrize("name", runtime.available())
def test_a_runtimes_code_changes_only_with_its_recorded_version(name: str) -> None:
    record = runtime.declared(name)
    now = runtime.content_hash(name)
    assert record.content == now, (
        f"the code of course runtime {name} changed, its RUNTIME.toml did not: bump `version` (now "
        f"{record.version[0]}.{record.version[1]}; the minor if it only adds, the major if it changes or removes "
        f"what exists) and set content = \"{now}\"")


def test_there_is_a_shared_runtime_and_every_installed_unit_runs_on_it() -> None:
    assert "tinytorch" in runtime.available()
    for unit in modules.installed().values():
        assert runtime.require(unit).name == unit.runtime


@pytest.mark.parametrize(("need", "fits"), [("1.0", True), ("1.1", True), ("1.2", True), ("1.3", False), ("2.0", False),
                                            ("0.9", False)])
def test_a_unit_runs_on_its_major_at_its_minor_or_later(need: str, fits: bool) -> None:
    have = runtime.declared("tinytorch")
    assert have.version == (1, 2)  # the cases above are written for 1.2; move them with a bump
    unit = dataclasses.replace(modules.get("embeddings"), runtime_version=need)
    if fits:
        assert runtime.require(unit) == have
    else:
        with pytest.raises(ModuleUnitError, match=rf"written for course runtime tinytorch {need}.*has tinytorch 1\.2"):
            runtime.require(unit)


def test_a_unit_on_a_runtime_version_this_install_lacks_is_refused_with_the_fix(tmp_path: Path) -> None:
    """Grading with it stops before any sandbox, naming both versions (a clear error, exit 2, no
    traceback), and ``grader modules`` says why it cannot be used here."""
    from .conftest import TOY_UNIT, write_notebook

    newer = tmp_path / "unit"
    shutil.copytree(TOY_UNIT, newer, ignore=shutil.ignore_patterns("__pycache__"))
    init = newer / "__init__.py"
    init.write_text(init.read_text().replace('ModuleUnit(name="relu",', 'ModuleUnit(name="relu", runtime_version="1.9",'))
    site = tmp_path / "site"
    with unit_installed(site, newer, "relu = unit:UNIT"):
        env = {**os.environ, "PYTHONPATH": str(site), "GRADER_NO_DAEMON": "1"}
        notebook = write_notebook(tmp_path / "relu.ipynb", ["def relu(x):\n    return x * (x > 0)\n"])
        run = subprocess.run([sys.executable, "-m", "grader.cli", "grade", str(notebook), "--module", "relu"],
                             capture_output=True, text=True, env=env, timeout=300)
        listing = subprocess.run([sys.executable, "-m", "grader.cli", "modules", "relu"], capture_output=True,
                                 text=True, env=env, timeout=120)
    message = " ".join(run.stderr.split())
    assert run.returncode == 2, run.stdout + run.stderr
    assert "written for course runtime tinytorch 1.9" in message and "has tinytorch 1.2" in message
    assert "Traceback" not in run.stderr
    assert listing.returncode == 0 and "unusable here" in listing.stdout, listing.stdout + listing.stderr
