"""``grader selftest --mutants``: mutation-test the checks on the correct sources of a checkout.

Only the standard library is imported at first: ``add_selftest_parser`` runs every time the
``grader`` command line is built.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import GraderError, SelftestError

if TYPE_CHECKING:
    from rich.console import Console

    from ..rubric import Rubric
    from .mutants import Outcome, Summary
    from .mutate import Mutant, Source

EXIT_OK, EXIT_GATE, EXIT_USAGE = 0, 1, 2
EQUIVALENTS = Path("tests") / "mutants" / "equivalent.toml"


def add_selftest_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``selftest`` to the ``grader`` command's subparsers."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "selftest", help="test the grader itself: --mutants grades small changes of correct solutions",
        description="Mutation testing: grade one-change mutants of the reference solution and of the correct "
                    "golden notebooks; every mutant not listed as equivalent in the reviewed file must fail a check.")
    p.add_argument("--mutants", action="store_true", help="run the mutation test (the only self-test so far)")
    p.add_argument("sources", nargs="*", type=Path, metavar="SOURCE",
                   help="correct .py/.ipynb files to mutate (default: the course module's reference solution and "
                        "its golden correct_*.ipynb notebooks)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="graders running in parallel (default 1)")
    p.add_argument("--sample", type=int, metavar="N", help="grade only N mutants, drawn with --seed")
    p.add_argument("--seed", type=int, default=0, help="seed of the --sample draw (default 0)")
    p.add_argument("--grading-seed", type=int, default=0, metavar="N",
                   help="seed of the non-visible checks' inputs, the same for every mutant (default 0)")
    p.add_argument("--only", action="append", default=[], metavar="ID", help="grade only this mutant id (repeatable)")
    p.add_argument("--operator", action="append", default=[], metavar="OP", help="grade only this operator (repeatable)")
    p.add_argument("--equivalents", type=Path, metavar="FILE",
                   help=f"reviewed equivalent survivors (default: {EQUIVALENTS} in the checkout)")
    p.add_argument("--rubric", type=Path, help="rubric .toml (default: the installed course module's)")
    p.add_argument("--module", metavar="NAME", help="the course module (default: the one the first SOURCE says, else "
                                                    "the only one installed)")
    p.add_argument("--json", type=Path, metavar="FILE", help="also write every mutant's outcome as JSON")
    p.add_argument("--list", action="store_true", help="list the selected mutants without grading them")
    return p


def _checkout() -> Path:
    """The source checkout this package runs from, else the current folder."""
    here = Path(__file__).resolve().parents[2]
    return here if (here / EQUIVALENTS).is_file() else Path.cwd()


def examples_dir(module: str) -> Path:
    """The course module's golden submissions: its unit's ``examples``, else ``submissions/`` of the
    source checkout this package runs from, or of the current folder."""
    from .. import modules

    unit = modules.get(module)
    if unit.examples:
        return unit.root / unit.examples
    for root in (Path(__file__).resolve().parents[2], Path.cwd()):
        if (root / "submissions").is_dir():
            return root / "submissions"
    raise SelftestError("no golden submissions found (the unit names none and there is no submissions/ folder); "
                        "run it from the grader's repository or name the sources to mutate")


def selftest_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    console, errors = Console(highlight=False), Console(stderr=True, highlight=False, soft_wrap=True)
    if not console.is_terminal:  # logs and CI: keep ids and diff lines whole
        console = Console(highlight=False, width=200)
    if not args.mutants:
        errors.print("[red]error:[/] choose a self-test: grader selftest --mutants")
        return EXIT_USAGE
    if args.jobs < 1 or (args.sample is not None and args.sample < 1):
        errors.print("[red]error:[/] --jobs and --sample take a number of 1 or more")
        return EXIT_USAGE
    try:
        return _run(args, console, errors)
    except GraderError as e:
        errors.print(f"[red]error:[/] {escape(str(e))}")
        return EXIT_USAGE


def _other_modules_sources(module: str) -> frozenset[str]:
    """The names of the other installed course modules' default sources (their reference and
    golden notebooks): their entries in the shared reviewed file are not this run's to judge."""
    from .. import modules

    names: set[str] = set()
    for name in modules.installed():
        if name == module:
            continue
        names.add(name)
        try:
            names.update(p.stem for p in examples_dir(name).glob("correct_*.ipynb"))
        except SelftestError:
            continue
    return frozenset(names)


def default_sources(module: str) -> list[Source]:
    """The rubric module's reference solution and the checkout's correct golden notebooks."""
    from .. import modules
    from .mutate import load_source

    notebooks = sorted(examples_dir(module).glob("correct_*.ipynb"))
    return [load_source(modules.get(module).reference_path, "reference", name=module), *(load_source(p) for p in notebooks)]


def _sources(args: argparse.Namespace, module: str) -> tuple[list[Source], bool]:
    from .mutate import load_source

    if args.sources:
        return [load_source(p) for p in args.sources], False
    return default_sources(module), True


def _select(args: argparse.Namespace, generated: list[Mutant]) -> list[Mutant]:
    from .mutate import sample
    from .operators import OPERATORS

    if unknown := sorted(set(args.operator) - set(OPERATORS)):
        raise SelftestError(f"unknown operator {', '.join(unknown)}; choose from {', '.join(OPERATORS)}")
    chosen = [m for m in generated if (not args.only or m.id in args.only)
              and (not args.operator or m.operator in args.operator)]
    if missing := sorted(set(args.only) - {m.id for m in generated}):
        raise SelftestError(f"no mutant {', '.join(missing)}; `grader selftest --mutants --list` shows the ids")
    if not chosen:
        raise SelftestError("no mutant of these sources matches both --only and --operator; drop one of them")
    return sample(chosen, args.sample, args.seed)


def _run(args: argparse.Namespace, console: Console, errors: Console) -> int:
    from ..rubric import load_rubric
    from .mutants import load_equivalents, summarize
    from .mutate import generate

    if args.equivalents is not None and not args.equivalents.is_file():
        raise SelftestError(f"--equivalents {args.equivalents}: no such file; give the reviewed equivalents TOML "
                            f"(the checkout's is {EQUIVALENTS})")
    if args.rubric is None:
        from ..modules.choose import choose_module

        rubric = load_rubric(module=choose_module(args.sources[0] if args.sources else None, args.module).name)
    else:
        rubric = load_rubric(args.rubric)
    sources, every_source = _sources(args, rubric.module)
    generated = [m for s in sources for m in generate(s, rubric.targets)]
    chosen = _select(args, generated)
    if args.list:
        for m in chosen:
            console.print(f"{m.id}\t{m.where}\t{_short(m.before)} → {_short(m.after)}", markup=False, soft_wrap=True)
        return EXIT_OK
    equivalents_path = args.equivalents or (_checkout() / EQUIVALENTS)
    equivalents = load_equivalents(equivalents_path)
    started = time.monotonic()
    outcomes = _grade(args, rubric, sources, chosen, errors)
    summary = summarize(outcomes, equivalents, generated, every_source=every_source,
                        foreign=_other_modules_sources(rubric.module) if every_source else frozenset())
    console.print(f"{len(chosen)} of {len(generated)} mutants from {len(sources)} source(s) graded in "
                  f"{time.monotonic() - started:.0f} s with {args.jobs} job(s); grading seed {args.grading_seed}")
    report(summary, equivalents_path, console)
    if args.json:
        write_json(args.json, outcomes, equivalents)
    return EXIT_OK if summary.passed else EXIT_GATE


def _grade(args: argparse.Namespace, rubric: Rubric, sources: list[Source], chosen: list[Mutant],
           errors: Console) -> list[Outcome]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from ..pipeline import Grader
    from .mutants import check_baselines, grade_mutants

    def factory() -> Grader:
        return Grader(rubric, "local", seed=args.grading_seed)

    with factory() as first:
        check_baselines([s for s in sources if any(m.source is s for m in chosen)], first)
    progress = Progress(TextColumn("[bold]mutants"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[survived]} survived"), TimeElapsedColumn(), TextColumn("eta"),
                        TimeRemainingColumn(), console=errors, transient=True)
    task = progress.add_task("mutants", total=len(chosen), survived=0)
    survived = 0

    def done(outcome: Outcome) -> None:
        nonlocal survived
        survived += not outcome.killed
        progress.update(task, advance=1, survived=survived)

    with progress:
        return grade_mutants(chosen, factory, jobs=args.jobs, on_done=done)


def _short(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def unasked_equivalents(path: Path) -> set[str]:
    """The reviewed equivalents marked ``unasked``: equivalent under the assignment only."""
    import tomllib

    from .mutants import EquivalentsFile

    try:
        return {e.id for e in EquivalentsFile.model_validate(tomllib.loads(path.read_text(encoding="utf-8"))).equivalent
                if e.unasked}
    except Exception:  # load_equivalents has reported a broken file already
        return set()


def report(summary: Summary, equivalents_path: Path, console: Console) -> None:
    """The kill rates per source and per generation, then every survivor and every stale reviewed entry."""
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in ("source", "generation", "mutants", "killed", "equivalent", "survived", "kill rate",
                   "killed by hidden checks only"):
        table.add_column(column, justify="left" if column in ("source", "generation") else "right")
    for tally in [*summary.by_source.values(), *summary.by_generation.values()]:
        survived = tally.total - tally.killed - tally.equivalent
        table.add_row(escape(tally.label), escape(tally.generation), str(tally.total), str(tally.killed),
                      str(tally.equivalent), str(survived), _rate(tally.rate), str(tally.hidden_only))
    console.print(table)
    unasked = unasked_equivalents(equivalents_path)
    if unasked:
        console.print(f"{len(unasked)} of the reviewed equivalents change only what the assignment never asks for "
                      "(unasked = true): the kill rate is a rate on asked behaviour")
    if summary.survivors:
        console.print(f"\n[bold red]{len(summary.survivors)} mutant(s) survived[/] (not listed in "
                      f"{escape(str(equivalents_path))}): add a check that catches each, or list it there with the "
                      "reason it is equivalent")
        for o in summary.survivors:
            m = o.mutant
            console.print(f"  {escape(m.id)}  [dim]{m.operator}, {escape(m.where)}[/]", soft_wrap=True)
            console.print(f"      - {escape(_short(m.before))}\n      + {escape(_short(m.after))}", soft_wrap=True)
    for o in summary.killed_but_listed:
        console.print(f"[yellow]listed as equivalent but killed[/] by {', '.join(o.failed)}: {escape(o.mutant.id)} "
                      f"(a correct program that fails a check, or a wrong entry: remove it or fix the check)")
    for mutant_id in summary.unknown_listed:
        console.print(f"[yellow]listed as equivalent but no such mutant[/]: {escape(mutant_id)} (remove the entry)")
    if summary.passed:
        console.print("[green]every non-equivalent mutant was killed[/]")


def write_json(path: Path, outcomes: list[Outcome], equivalents: dict[str, str]) -> None:
    rows = [{"id": o.mutant.id, "source": o.mutant.source.name, "generation": o.mutant.source.generation,
             "operator": o.mutant.operator, "variant": o.mutant.variant, "where": o.mutant.where,
             "before": o.mutant.before, "after": o.mutant.after, "killed": o.killed, "failed_checks": list(o.failed),
             "failed_visible_checks": list(o.failed_visible), "equivalent": equivalents.get(o.mutant.id)}
            for o in outcomes]
    path.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")
