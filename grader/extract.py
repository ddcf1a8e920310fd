"""Extract stage: turn a submission's code cells into the minimal code the rubric's targets need.

Each cell is parsed on its own, so one broken cell costs only itself. IPython magics and shell
escapes are removed before parsing and never run. Of the top-level statements, only imports,
definitions and assignments can be kept, and only when a target needs them (transitively, by
scope-aware name analysis with ``symtable``). Calls, loops, prints and ``__main__`` blocks are
dropped: that is where notebooks keep inline tests and slow analyses. Statements that complete a
kept name (``Layer.forward = f``, ``setattr(Layer, "__call__", f)``) stay with it.

Kept statements run in notebook order, as when the notebook runs from top to bottom: a name
defined twice ends up with its last definition, and a method sees the last definition of a helper
it calls. A cell Python would refuse (a syntax error, ``def f(a, a)``, nesting too deep to parse)
costs only itself.
"""

from __future__ import annotations

import ast
import copy
import re
import symtable
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from .models import CellSyntaxError, Chunk, CodeCell, DropKind, Dropped, StudentCode, Submission

_MAGIC = re.compile(r"^(\s*)(%|!)")
_MAGIC_ASSIGN = re.compile(r"^(\s*)[A-Za-z_][\w.]*(\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*(%|!)")
_HELP = re.compile(r"^(\s*)[A-Za-z_][\w.]*\?\??\s*$")
_PYTHON_BODY_CELL_MAGICS = {"time", "timeit", "capture", "prun"}


@dataclass(frozen=True)
class _Stmt:
    cell: int
    line: int
    source: str
    node: ast.stmt
    binds: frozenset[str]
    modifies: frozenset[str]
    uses: frozenset[str]

    @property
    def defines(self) -> frozenset[str]:
        return self.binds | self.modifies


# CPython 3.11 keeps the ast module's recursion bookkeeping per interpreter, not per thread:
# two threads parsing at once can fail with "AST constructor recursion depth mismatch".
# Batch grading runs several graders in threads, so every use of ast here is serialised.
_AST_LOCK = threading.RLock()


def extract(submission: Submission, targets: Sequence[str]) -> StudentCode:
    """Keep what ``targets`` need from ``submission``; report everything that was dropped."""
    with _AST_LOCK:
        return extract_unlocked(submission, targets)


def extract_unlocked(submission: Submission, targets: Sequence[str]) -> StudentCode:
    """``extract`` without the lock, for a process with one thread (a forked intake child, where
    the lock may be held by a thread of the parent that does not exist in the child)."""
    dropped: list[Dropped] = []
    errors: list[CellSyntaxError] = []
    candidates: list[_Stmt] = []
    for cell in submission.cells:
        text = _strip_magics(cell, dropped)
        if text is None or not text.strip():
            continue
        try:
            with warnings.catch_warnings():  # the student's warnings ("\d", ``x is 1``): neither
                warnings.simplefilter("ignore")  # printed here nor, under -W error, a syntax error
                candidates.extend(_statements(cell.index, text, dropped))
        except SyntaxError as e:
            errors.append(CellSyntaxError(cell=cell.index, line=e.lineno or 0, message=e.msg))
        except (ValueError, MemoryError, RecursionError) as e:
            errors.append(CellSyntaxError(cell=cell.index, line=0, message=_unparsable(e)))

    target_cells = {t: tuple(s.cell for s in candidates if t in s.binds) for t in targets}
    kept_idx = _closure(candidates, targets) | {
        i for i, s in enumerate(candidates) if _is_course_import(s.node)
    }
    for i, s in enumerate(candidates):
        if i not in kept_idx:
            dropped.append(Dropped(cell=s.cell, line=s.line, kind="unused", detail=_summary(s.node, s.source)))
    chunks = tuple(
        Chunk(cell=s.cell, line=s.line, source=s.source, defines=tuple(sorted(s.defines)),
              modifies=tuple(sorted(s.modifies - s.binds)))
        for i, s in enumerate(candidates)
        if i in kept_idx
    )
    kept = tuple(dict.fromkeys(n for c in chunks for n in c.defines))
    dropped.sort(key=lambda d: (d.cell, d.line))
    return StudentCode(
        chunks=chunks,
        target_cells=target_cells,
        kept=kept,
        dropped=tuple(dropped),
        syntax_errors=tuple(errors),
        notes=tuple(_redefinition_notes(candidates, targets)),
    )


def _statements(cell: int, text: str, dropped: list[Dropped]) -> list[_Stmt]:
    """The statements of one cell that may be kept; SyntaxError (or MemoryError, RecursionError
    for nesting too deep) if the cell would not compile, as Python would refuse the whole cell."""
    filename = f"<cell {cell}>"
    tree = ast.parse(text, filename=filename)
    # Compiling also finds what only the compiler rejects (``def f(a, a)``, ``return`` outside a
    # function); IPython accepts top-level ``await``, so that is allowed.
    compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    lines = text.splitlines()
    out = []
    for node in tree.body:
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        source = "\n".join(lines[start - 1 : node.end_lineno])
        kind = _drop_kind(node)
        if kind is not None:
            dropped.append(Dropped(cell=cell, line=node.lineno, kind=kind, detail=_summary(node, source)))
            continue
        for part, part_source in _split_course_import(node, source):
            binds, modifies, uses = _names(part, part_source)
            out.append(_Stmt(cell, start, part_source, part, binds, modifies, uses))
    return out


def _split_course_import(node: ast.stmt, source: str) -> list[tuple[ast.stmt, str]]:
    """``from runtime.x import A, B`` as one statement per name, so that a name the grading
    runtime lacks (``Linear``, say) costs only the code that uses it, not ``A`` as well."""
    if not (_is_course_import(node) and isinstance(node, ast.ImportFrom) and len(node.names) > 1):
        return [(node, source)]
    parts: list[tuple[ast.stmt, str]] = []
    for alias in node.names:
        part = ast.ImportFrom(module=node.module, names=[alias], level=node.level)
        ast.copy_location(part, node)
        parts.append((part, ast.unparse(part)))
    return parts


def _unparsable(e: BaseException) -> str:
    if isinstance(e, (MemoryError, RecursionError)):
        return "nested too deeply for Python to parse"
    return str(e).splitlines()[0][:200] if str(e) else type(e).__name__


def _redefinition_notes(stmts: Sequence[_Stmt], targets: Iterable[str]) -> Iterator[str]:
    """One note per target bound by more than one distinct statement (identical copies are not
    redefinitions): the kept statements run in notebook order, so the last one is graded."""
    for name in targets:
        binding = [s for s in stmts if name in s.binds]
        if len(binding) > 1 and len({_normalized(s) for s in binding}) > 1:
            cells = ", ".join(dict.fromkeys(str(s.cell) for s in binding))
            yield (f"{name} is defined more than once (cells {cells}); as when the notebook runs from top to "
                   f"bottom, the last definition (cell {binding[-1].cell}) is the one graded")


def _normalized(stmt: _Stmt) -> str:
    try:
        return ast.dump(stmt.node)
    except RecursionError:  # ast.dump recurses in Python
        return stmt.source


def _strip_magics(cell: CodeCell, dropped: list[Dropped]) -> str | None:
    """Blank out magics, shell escapes and ``?`` help lines, keeping line numbers stable."""
    lines = cell.source.splitlines()
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].strip()[2:].split()[0] if lines[0].strip()[2:] else ""
        dropped.append(Dropped(cell=cell.index, line=1, kind="magic", detail=lines[0].strip()[:80]))
        if magic not in _PYTHON_BODY_CELL_MAGICS:
            return None
        lines[0] = ""
    out = []
    in_continuation = False
    for n, line in enumerate(lines, start=1):
        if in_continuation or _MAGIC.match(line) or _MAGIC_ASSIGN.match(line) or _HELP.match(line):
            if not in_continuation:
                kind: DropKind = (
                    "shell" if line.lstrip().lstrip("%").startswith("!") or "!" in line.split("%")[0] else "magic")
                dropped.append(Dropped(cell=cell.index, line=n, kind=kind, detail=line.strip()[:80]))
            indent = re.match(r"\s*", line).group(0)  # type: ignore[union-attr]
            out.append(f"{indent}pass" if indent and not in_continuation else "")
            in_continuation = line.rstrip().endswith("\\")
        else:
            out.append(line)
    return "\n".join(out)


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    parts = [node.test.left, *node.test.comparators]
    return any(isinstance(p, ast.Name) and p.id == "__name__" for p in parts)


def _attribute_setter(node: ast.stmt) -> str | None:
    """The name whose attribute ``setattr(name..., "attr", value)`` (or ``delattr``) changes."""
    if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.value.args
            and isinstance(node.value.func, ast.Name) and node.value.func.id in ("setattr", "delattr")):
        return None
    base = node.value.args[0]
    while isinstance(base, (ast.Attribute, ast.Subscript)):
        base = base.value
    return base.id if isinstance(base, ast.Name) else None


def _drop_kind(node: ast.stmt) -> DropKind | None:
    """Why a top-level statement can never be kept, or None if it may be kept."""
    if _is_main_guard(node):
        return "main_block"
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return "loop"
    if isinstance(node, ast.Expr):
        if _attribute_setter(node) is not None:
            return None  # ``setattr(Layer, "__call__", f)`` completes a class: it stays with it
        call = node.value
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print":
            return "print"
        return "call" if isinstance(call, (ast.Call, ast.Await)) else "other"
    if isinstance(node, (ast.With, ast.AsyncWith, ast.Delete, ast.Assert, ast.Raise, ast.Return,
                         ast.Pass, ast.Break, ast.Continue, ast.Global, ast.Nonlocal)):
        return "other"
    return None


def _summary(node: ast.stmt, source: str) -> str:
    """The statement's first line as Python would print it (a compound statement's header only:
    its body is never unparsed)."""
    try:
        if isinstance(node, ast.If):
            text = "if " + ast.unparse(node.test) + ":"
        else:
            header = copy.copy(node)
            for part in ("body", "orelse", "handlers", "finalbody", "cases"):
                if getattr(header, part, None):
                    setattr(header, part, [ast.Pass()] if part == "body" else [])
            text = ast.unparse(header)
    except RecursionError:  # ast.unparse recurses in Python: very deep expressions exceed the limit
        text = source
    return (text.splitlines() or [""])[0][:80]


def _names(node: ast.stmt, source: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """Module-level names a statement binds, changes (``name.attr = ...``) and reads."""
    binds: set[str] = set()
    modifies: set[str] = set()
    uses: set[str] = set()
    setter = _attribute_setter(node)
    if setter is not None:
        modifies.add(setter)
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for t in targets:
            base = t
            while isinstance(base, (ast.Attribute, ast.Subscript)):
                base = base.value
            if isinstance(base, ast.Name) and base is not t:
                # ``Tensor.x = ...`` changes a name others use: keep it with that name.
                modifies.add(base.id)
    table = symtable.symtable(source, "<stmt>", "exec")
    for sym in table.get_symbols():
        if (sym.is_assigned() or sym.is_imported()) and sym.get_name() not in modifies:
            binds.add(sym.get_name())
        if sym.is_referenced():
            uses.add(sym.get_name())
    for child in table.get_children():
        uses |= _global_reads(child)
    return frozenset(binds), frozenset(modifies), frozenset(uses)


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    found = {
        s.get_name()
        for s in table.get_symbols()
        if s.is_referenced() and (s.is_global() or (table.get_type() == "class" and not s.is_assigned()))
    }
    for child in table.get_children():
        found |= _global_reads(child)
    return found


def _course_runtimes() -> frozenset[str]:
    """The course runtimes the installed units run on (each unit's ``runtime``)."""
    from . import modules

    return frozenset(unit.runtime.split(".")[0] for unit in modules.installed().values())


def _is_course_import(node: ast.stmt) -> bool:
    """Course-runtime imports are kept even when unused: some activate autograd as a side effect."""
    runtimes = _course_runtimes()
    if isinstance(node, ast.Import):
        return all(a.name.split(".")[0] in runtimes for a in node.names)
    return isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in runtimes


def _closure(stmts: Sequence[_Stmt], targets: Iterable[str]) -> set[int]:
    """Indexes of the statements the targets need, following reads back to the bindings."""
    by_name: dict[str, list[int]] = {}
    for i, s in enumerate(stmts):
        for name in s.defines:
            by_name.setdefault(name, []).append(i)
    keep: set[int] = set()
    todo = list(targets)
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for i in by_name.get(name, []):
            if i not in keep:
                keep.add(i)
                todo.extend(stmts[i].uses)
    return keep
