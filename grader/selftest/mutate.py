"""Mutants of correct sources: the reference solution (``.py``) and golden notebooks (``.ipynb``).

Only the graded code is mutated: the rubric's targets, the student's own backward class (a
subclass of ``Function``) and the top-level functions and classes they use, in the cell that
defines them last. Test cells, analysis code and imports stay as they are.

A mutant's id is ``source/qualname@line:col/operator/variant``, with the line counted from the
``def`` or ``class`` line of the innermost function or class around the change, so an id survives
edits elsewhere in the file.
"""

from __future__ import annotations

import ast
import copy
import difflib
import json
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SelftestError
from .operators import Edit, Site, SourceText, sites

_DEF = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


@dataclass(frozen=True)
class Source:
    """A correct file to mutate: its code cells by position (a ``.py`` file is one cell at 0)."""

    name: str
    path: Path
    generation: str
    cells: tuple[tuple[int, str], ...]
    notebook: dict[str, Any] | None = None

    def write(self, directory: Path, cell: int, code: str, stem: str) -> Path:
        """This file with cell ``cell`` replaced by ``code``, written as ``directory/stem<suffix>``."""
        path = directory / f"{stem}{self.path.suffix}"
        if self.notebook is None:
            path.write_text(code, encoding="utf-8")
            return path
        nb = copy.copy(self.notebook)
        nb["cells"] = list(nb["cells"])
        nb["cells"][cell] = {**nb["cells"][cell], "source": code}
        path.write_text(json.dumps(nb), encoding="utf-8")
        return path


@dataclass(frozen=True)
class Mutant:
    """One change to one source. ``cell`` is a notebook's 1-based cell number, None for a ``.py`` file."""

    id: str
    source: Source
    operator: str
    variant: str
    qualname: str
    cell: int | None
    line: int
    before: str
    after: str
    code: str

    @property
    def where(self) -> str:
        return f"{self.source.path.name}:{'' if self.cell is None else f'cell {self.cell}, '}line {self.line}"

    def write(self, directory: Path, stem: str) -> Path:
        return self.source.write(directory, (self.cell or 1) - 1, self.code, stem)


DEFAULT_GENERATION = "course"  # a source's generation when neither the caller nor the unit says one


def load_source(path: Path, generation: str | None = None, name: str | None = None,
                guess: Callable[[Sequence[str]], str | None] | None = None) -> Source:
    """Read a ``.py`` or ``.ipynb`` source. Its generation: ``generation``, else what ``guess`` (the
    unit's ``SOURCE_GENERATION``, grader.judge.rules) reads from its code cells, else
    ``DEFAULT_GENERATION``. ``name`` (default: the file's stem) starts the ids of its mutants."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as e:
        raise SelftestError(f"{path}: cannot be read ({e.strerror}); give a .py or .ipynb file") from None
    notebook: dict[str, Any] | None = None
    if path.suffix == ".ipynb":
        try:
            notebook = json.loads(raw)
            cells = tuple((i, _text(c["source"])) for i, c in enumerate(notebook["cells"]) if c["cell_type"] == "code")
        except (ValueError, KeyError, TypeError) as e:
            raise SelftestError(f"{path}: not a readable notebook ({e}); give a valid .ipynb file") from None
    elif path.suffix == ".py":
        cells = ((0, raw),)
    else:
        raise SelftestError(f"{path}: unsupported file type; give a .py or .ipynb file")
    generation = generation or (guess([code for _, code in cells]) if guess else None) or DEFAULT_GENERATION
    return Source(name or path.stem, path, generation, cells, notebook)


def _text(src: Any) -> str:
    return "".join(src) if isinstance(src, list) else str(src)


def _parsed_cells(source: Source) -> Iterable[tuple[int, str, ast.Module]]:
    for position, code in source.cells:
        try:
            yield position, code, ast.parse(code)
        except SyntaxError:
            continue  # magics and shell lines: analysis cells, never the graded code


def _top_level_defs(source: Source) -> dict[str, tuple[int, _DEF]]:
    """Name → (cell position, node) of every top-level def or class; a later definition wins."""
    found: dict[str, tuple[int, _DEF]] = {}
    for position, _code, tree in _parsed_cells(source):
        for node in tree.body:
            if isinstance(node, _DEF):
                found[node.name] = (position, node)
    return found


def _is_function_class(node: ast.ClassDef) -> bool:
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
        if name.endswith("Function"):
            return True
    return False


def graded_definitions(source: Source, targets: Sequence[str]) -> dict[str, tuple[int, _DEF]]:
    """The targets, the student's backward classes, and the top-level defs they use, transitively."""
    defs = _top_level_defs(source)
    todo = [n for n, (_, node) in defs.items()
            if n in targets or (isinstance(node, ast.ClassDef) and _is_function_class(node))]
    chosen: dict[str, tuple[int, _DEF]] = {}
    while todo:
        name = todo.pop()
        if name in chosen:
            continue
        chosen[name] = defs[name]
        used = {n.id for n in ast.walk(defs[name][1]) if isinstance(n, ast.Name)}
        todo.extend(sorted(used & defs.keys()))
    return dict(sorted(chosen.items(), key=lambda kv: (kv[1][0], kv[1][1].lineno)))


def generate(source: Source, targets: Sequence[str]) -> list[Mutant]:
    """Every mutant of ``source``, in source order, without duplicates or no-op changes."""
    chosen = graded_definitions(source, targets)
    missing = [t for t in targets if t not in chosen]
    if missing:
        raise SelftestError(f"{source.path}: defines no {', '.join(missing)}; give a complete, correct solution")
    codes = dict(source.cells)
    mutants: list[Mutant] = []
    seen_ids: set[str] = set()
    seen_code: set[tuple[int, str]] = set()
    for position, node in chosen.values():
        code = codes[position]
        src, original = SourceText(code), ast.dump(ast.parse(code))
        for site in sites(node, src):
            new = _apply(code, site.candidate.edits)
            if (position, new) in seen_code or not _changes_program(new, original):
                continue
            seen_code.add((position, new))
            mutant_id = _unique(_mutant_id(source, site), seen_ids)
            before, after = _changed_lines(code, new)
            cell = None if source.notebook is None else position + 1
            mutants.append(Mutant(mutant_id, source, site.candidate.operator, site.candidate.variant, site.qualname,
                                  cell, site.candidate.line, before, after, new))
    return mutants


def _apply(code: str, edits: Sequence[Edit]) -> str:
    for edit in sorted(edits, key=lambda e: e.start, reverse=True):
        code = code[:edit.start] + edit.new + code[edit.end:]
    return code


def _changes_program(new: str, original_dump: str) -> bool:
    try:
        return ast.dump(ast.parse(new)) != original_dump
    except SyntaxError:
        return False  # an operator bug; tests/test_mutants.py proves every operator's output parses


def _mutant_id(source: Source, site: Site) -> str:
    c = site.candidate
    return f"{source.name}/{site.qualname}@{c.line - site.def_line}:{c.col}/{c.operator}/{c.variant}"


def _unique(mutant_id: str, seen: set[str]) -> str:
    n, unique = 1, mutant_id
    while unique in seen:
        n += 1
        unique = f"{mutant_id}#{n}"
    seen.add(unique)
    return unique


def _changed_lines(old: str, new: str) -> tuple[str, str]:
    """The changed line(s) before and after, each joined into one stripped line."""
    removed, added = [], []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), n=0, lineterm=""):
        if line.startswith("-") and not line.startswith("---"):
            removed.append(line[1:].strip())
        elif line.startswith("+") and not line.startswith("+++"):
            added.append(line[1:].strip())
    return " ⏎ ".join(removed), " ⏎ ".join(added)


def sample(mutants: Sequence[Mutant], size: int | None, seed: int) -> list[Mutant]:
    """``size`` mutants drawn with ``seed`` (all when size is None or too big), in their original order."""
    if size is None or size >= len(mutants):
        return list(mutants)
    keep = set(random.Random(seed).sample(range(len(mutants)), size))
    return [m for i, m in enumerate(mutants) if i in keep]
