"""``tito test --module``: finding a module's work, grading it, and leaving upstream tito alone.

Each test builds a TinyTorch-shaped checkout of its own: a stub ``tito`` package (a ``BaseCommand``
and a ``TinyTorchCLI`` with a hard-coded command table, written here from the interface alone) and
``modules/11_embeddings/`` holding a student notebook from ``submissions/``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from .conftest import SUBMISSIONS

pytestmark = pytest.mark.usefixtures("toy_site")  # two units installed, as in a course: module 11 still grades with no --module

STUB_TITO = {
    "__init__.py": "",
    "commands/__init__.py": "",
    "commands/base.py": """
        import abc


        class BaseCommand(abc.ABC):
            def __init__(self, config):
                self.config = config

            @property
            @abc.abstractmethod
            def name(self): ...

            @property
            @abc.abstractmethod
            def description(self): ...

            @abc.abstractmethod
            def add_arguments(self, parser): ...

            @abc.abstractmethod
            def run(self, args): ...

            def validate_args(self, args):
                pass

            def execute(self, args):
                self.validate_args(args)
                return self.run(args)
    """,
    "commands/test.py": """
        from .base import BaseCommand


        class TestCommand(BaseCommand):
            name = "test"
            description = "stub: run a module's inline tests"

            def add_arguments(self, parser):
                parser.add_argument("module", nargs="?")
                parser.add_argument("--all", action="store_true")

            def run(self, args):
                print(f"STUB-UPSTREAM test module={args.module} all={args.all}")
                return 0 if args.module == "11" else 3
    """,
    "commands/status.py": """
        from .base import BaseCommand


        class StatusCommand(BaseCommand):
            name = "status"
            description = "stub: show progress"

            def add_arguments(self, parser):
                pass

            def run(self, args):
                print("STUB-UPSTREAM status")
                return 0
    """,
    "main.py": """
        import argparse
        import sys

        from .commands.status import StatusCommand
        from .commands.test import TestCommand


        class TinyTorchCLI:
            def __init__(self):
                self.config = {"project": "stub"}
                self.commands = {"status": StatusCommand, "test": TestCommand}

            def run(self, argv):
                parser = argparse.ArgumentParser(prog="tito")
                parser.add_argument("--verbose", action="store_true")
                sub = parser.add_subparsers(dest="command")
                for name, command_class in self.commands.items():
                    command = command_class(self.config)
                    command.add_arguments(sub.add_parser(name, help=command.description))
                args = parser.parse_args(argv)
                if args.command is None:
                    parser.print_help()
                    return 0
                print("STUB-UPSTREAM banner")
                return self.commands[args.command](self.config).execute(args)


        def main():
            return TinyTorchCLI().run(sys.argv[1:])
    """,
}


def make_checkout(root: Path, notebook: str | None = "correct_tinytorch.ipynb", *, with_tito: bool = True) -> Path:
    """A TinyTorch-shaped checkout: stub tito, modules/11_embeddings/11_embeddings.ipynb, another module."""
    if with_tito:
        for name, source in STUB_TITO.items():
            path = root / "tito" / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(source).lstrip(), encoding="utf-8")
    (root / "modules" / "11_embeddings").mkdir(parents=True)
    (root / "src" / "01_tensor").mkdir(parents=True)
    if notebook:
        shutil.copyfile(SUBMISSIONS / notebook, root / "modules" / "11_embeddings" / "11_embeddings.ipynb")
    return root


UPSTREAM_SCRIPT = """\
import re
import sys

from tito.main import main

if __name__ == "__main__":
    sys.argv[0] = re.sub(r"(-script\\.pyw|\\.exe)?$", "", sys.argv[0])
    sys.exit(main())
"""


def tito(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``tito-grade ARGS`` (-P: the working directory is not on sys.path, as for a console script)."""
    return subprocess.run([sys.executable, "-P", "-m", "grader.tito", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def upstream_tito(*args: str | Path, cwd: Path, checkout: Path) -> subprocess.CompletedProcess[str]:
    """TinyTorch's own ``tito`` script (as pip writes it) in this environment, where the grader's
    startup hook is installed: the checkout's ``tito`` package is importable, as after ``pip install -e .``."""
    script = checkout / "bin" / "tito"
    if not script.exists():
        script.parent.mkdir(exist_ok=True)
        script.write_text(UPSTREAM_SCRIPT, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    return subprocess.run([sys.executable, str(script), *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=env)


# ---- tito test --module ----------------------------------------------------------------------------


def test_module_is_found_and_graded_with_the_public_checks(tmp_path: Path) -> None:
    run = tito("test", "--module", "embeddings", cwd=make_checkout(tmp_path))
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())  # rich wraps long lines
    assert "Grading module 11 embeddings: modules/11_embeddings/11_embeddings.ipynb" in out
    assert "emb_lookup ✔ passed 9/9" in out and "grad_batch ✔" not in out  # hidden checks need --hidden
    assert "All 28 public checks passed (94/94 points)" in out and "practice run" in out
    assert "STUB-UPSTREAM" not in run.stdout  # answered without running upstream's CLI


def test_through_upstreams_main_the_registered_command_grades(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    run = tito("--verbose", "test", "--module", "11", cwd=checkout / "modules" / "11_embeddings")
    assert run.returncode == 0, run.stderr
    assert "STUB-UPSTREAM banner" in run.stdout  # upstream's main parsed the command line and dispatched
    assert "All 28 public checks passed" in " ".join(run.stdout.split())


def test_a_buggy_notebook_exits_1_with_feedback_and_hidden_adds_the_staff_checks(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path, "bug_backward_overwrite.ipynb")
    run = tito("test", "--module", "11_embeddings", cwd=checkout)
    assert run.returncode == 1, run.stderr
    out = " ".join(run.stdout.split())
    assert "grad_accumulate ✘ failed 0/8" in out
    assert "Likely cause: row 0 received 1x the gradient instead of 2x" in out
    assert "2 of 28 public checks did not pass (83/94 points)" in out

    staff = tito("test", "--module", "11_embeddings", "--hidden", cwd=checkout)
    assert staff.returncode == 1, staff.stderr
    out = " ".join(staff.stdout.split())
    assert "3 of 30 checks did not pass (86/100 points)" in out
    assert "grad_batch ✘ failed" in out and "details are not shown" not in out


def test_a_missing_module_is_a_clear_error(tmp_path: Path) -> None:
    run = tito("test", "--module", "attention", cwd=make_checkout(tmp_path))
    assert run.returncode == 2
    err = " ".join(run.stderr.split())
    assert f"no module attention in {tmp_path}: looked for modules/NN_attention/*.ipynb" in err
    assert "or pass --notebook PATH" in err and "Traceback" not in err


def test_the_positional_upstream_form_and_other_commands_are_untouched(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    run = tito("test", "11", cwd=checkout)
    assert (run.returncode, run.stdout) == (0, "STUB-UPSTREAM banner\nSTUB-UPSTREAM test module=11 all=False\n")
    assert tito("test", "12", "--all", cwd=checkout).returncode == 3  # upstream's own exit status
    assert tito("status", cwd=checkout).stdout == "STUB-UPSTREAM banner\nSTUB-UPSTREAM status\n"
    helped = tito("test", "--help", cwd=checkout).stdout
    assert "module" in helped and "--all" in helped and "--module MODULE" in helped


def test_a_fork_that_registers_the_command_itself_keeps_working_under_our_shim(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    main = checkout / "tito" / "main.py"
    main.write_text(main.read_text(encoding="utf-8").replace(
        '"test": TestCommand}', '"test": grading_test_command(TestCommand)}').replace(
        "import sys\n", "import sys\n\nfrom grader.tito import grading_test_command\n"), encoding="utf-8")
    assert tito("test", "11", cwd=checkout).stdout.endswith("STUB-UPSTREAM test module=11 all=False\n")
    helped = tito("test", "--help", cwd=checkout)
    assert helped.returncode == 0 and helped.stdout.count("\n  --module MODULE") == 1  # listed once, not twice


def test_an_unavailable_backend_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    run = tito("test", "--module", "11", "--backend", "docker", cwd=make_checkout(tmp_path))
    assert run.returncode == 2 and run.stderr.startswith("error: ") and "Traceback" not in run.stderr


def test_without_tinytorch_the_command_still_works_on_its_own(tmp_path: Path) -> None:
    notebook = shutil.copyfile(SUBMISSIONS / "correct_alt_style.ipynb", tmp_path / "mine.ipynb")
    run = tito("test", "--module", "embeddings", "--notebook", notebook, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "All 28 public checks passed" in " ".join(run.stdout.split())
    positional = tito("test", "11", cwd=tmp_path)
    assert positional.returncode == 2 and "tito test --module NAME" in " ".join(positional.stderr.split())
    other = tito("status", cwd=tmp_path)
    assert other.returncode == 2 and "TinyTorch's tito is not installed here" in " ".join(other.stderr.split())


def test_the_grader_owns_no_tito_script_only_tito_grade(tmp_path: Path) -> None:
    scripts = {e.name: e.value for e in entry_points(group="console_scripts")}
    assert "tito" not in scripts and scripts.get("tito-grade") == "grader.tito:main", "reinstall: pip install -e ."
    script = Path(sys.executable).parent / "tito-grade"
    run = subprocess.run([script, "test", "--module", "nonexistent"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2 and "no TinyTorch checkout at or above" in " ".join(run.stderr.split())


# ---- TinyTorch's own tito script, extended by the startup hook ---------------------------------------


def test_upstreams_script_grades_without_running_upstreams_cli(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    run = upstream_tito("test", "--module", "embeddings", cwd=checkout, checkout=checkout)
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())
    assert "Grading module 11 embeddings: modules/11_embeddings/11_embeddings.ipynb" in out
    assert "All 28 public checks passed (94/94 points)" in out
    assert "STUB-UPSTREAM" not in run.stdout  # upstream's tito.main was not executed


def test_upstreams_script_keeps_its_own_commands_and_gains_the_option(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    run = upstream_tito("test", "11", cwd=checkout, checkout=checkout)
    assert (run.returncode, run.stdout) == (0, "STUB-UPSTREAM banner\nSTUB-UPSTREAM test module=11 all=False\n")
    assert upstream_tito("test", "12", "--all", cwd=checkout, checkout=checkout).returncode == 3
    assert upstream_tito("status", cwd=checkout, checkout=checkout).stdout == "STUB-UPSTREAM banner\nSTUB-UPSTREAM status\n"
    helped = upstream_tito("test", "--help", cwd=checkout, checkout=checkout).stdout
    assert "--all" in helped and helped.count("\n  --module MODULE") == 1
    routed = upstream_tito("--verbose", "test", "--module", "11", cwd=checkout, checkout=checkout)
    assert routed.returncode == 0, routed.stderr
    assert "STUB-UPSTREAM banner" in routed.stdout and "All 28 public checks passed" in " ".join(routed.stdout.split())


def test_other_processes_of_the_environment_see_upstreams_tito_untouched(tmp_path: Path) -> None:
    checkout = make_checkout(tmp_path)
    probe = ("import sys, tito.main as m; "
             "print(type(m.__spec__.loader).__name__, getattr(m.TinyTorchCLI, '_tinytorch_grader', False), "
             "any('Tito' in type(f).__name__ for f in sys.meta_path))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(checkout)})
    assert run.stdout.split() == ["SourceFileLoader", "False", "False"], run.stderr


# ---- what the output says (issue 22) -------------------------------------------------------------


def test_the_total_says_which_checks_it_leaves_to_the_official_grading(tmp_path: Path) -> None:
    """94/94 is not full marks: the line under the table says what the public-only run left out,
    and the footer names one giver of the official grade."""
    run = tito("test", "--module", "embeddings", cwd=make_checkout(tmp_path))
    assert run.returncode == 0, run.stderr
    out = " ".join(run.stdout.split())
    assert ("94/94 on the public checks; 1 hidden check and 1 check released after the due date (6 points) run only "
            "in the official grading") in out
    assert "All 28 public checks passed (94/94 points)" in out
    assert out.count("official grade comes from") == 1 and "official grade comes from the course's" not in out
    staff = tito("test", "--module", "embeddings", "--hidden", cwd=make_checkout(tmp_path / "staff"))
    assert "official grading" not in staff.stdout and "All 30 checks passed (100/100 points)" in \
        " ".join(staff.stdout.split())


def untouched_starter(path: Path) -> Path:
    """The starter notebook before any work: every target's body is the starter's raise."""
    import json
    import re

    nb = json.loads((SUBMISSIONS / "bug_unfinished_starter.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        m = re.search(r"^(class (Embedding|PositionalEncoding|EmbeddingLayer)\b.*?:|"
                      r"def create_sinusoidal_embeddings\(.*?\).*?:)\n", source, re.M | re.S)
        if cell["cell_type"] == "code" and m:
            cell["source"] = source[:m.end()] + '    """TODO"""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n'
            cell["outputs"] = []
    path.write_text(json.dumps(nb), encoding="utf-8")
    return path


def test_an_untouched_starter_names_each_part_not_started_once(tmp_path: Path) -> None:
    notebook = untouched_starter(tmp_path / "starter.ipynb")
    run = tito("test", "--module", "embeddings", "--notebook", notebook, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    out = " ".join(run.stdout.split())
    assert out.count("NotImplementedError() is still there") == 4 and "Traceback" not in run.stdout + run.stderr
    assert ("Not started yet: PositionalEncoding (the starter's raise NotImplementedError() is still there in the cell "
            "starting `class PositionalEncoding:`). It blocks 6 checks: pe_broadcast, pe_too_long, pe_bad_shape, "
            "pe_grad, pe_init, pe_start_pos") in out
    assert "It blocks 3 checks: sin_pos0, sin_values, sin_fixed" in out
    assert "Called:" not in out  # no per-check feedback repeats the cause
    assert "28 of 28 public checks did not pass (0/94 points)" in out
    assert len(run.stdout.splitlines()) < 120


def test_what_stops_the_notebook_from_running_comes_before_the_table(tmp_path: Path) -> None:
    from .conftest import code_cells, write_notebook

    cells = code_cells(SUBMISSIONS / "correct_tinytorch.ipynb")
    at = next(i for i, c in enumerate(cells) if "class PositionalEncoding" in c)
    cells[at] = cells[at].replace("def forward", "def forward(:", 1)
    notebook = write_notebook(tmp_path / "typo.ipynb", cells)
    run = tito("test", "--module", "embeddings", "--notebook", notebook, cwd=tmp_path)
    assert run.returncode == 1, run.stderr
    syntax = run.stdout.index(f"Not run: cell {at + 1}, line ")
    assert syntax < run.stdout.index("typo.ipynb: 63/94") < run.stdout.index("layer_modes ✘ error")
    assert "Not defined: PositionalEncoding (no code cell defines it" in " ".join(run.stdout[:run.stdout.index(
        "typo.ipynb: 63/94")].split())
    assert run.stdout.count("syntax error") == 1  # said once, first
