"""AST mutation operators: where one small semantic change can be made in a function or class.

Each operator looks at one node and proposes candidates: an operator name, a variant, the position
of the change and the text edits that make it. Edits are made on the original text, so comments and
layout around the change survive and the mutant's diff is the changed line only.

Never mutated, because no check could or should see them: docstrings, f-strings (messages), the
arguments of ``raise`` and ``print``, ``assert`` messages, annotations, decorators and
``__repr__``/``__str__``. A ``raise`` statement itself can still be deleted.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

OPERATORS = ("constant", "compare", "boolean", "slice", "dtype", "delete", "swap_args", "drop_kwarg")
SKIPPED_FUNCTIONS = frozenset({"__repr__", "__str__"})


@dataclass(frozen=True)
class Edit:
    """Replace ``text[start:end]`` (character offsets) with ``new``."""

    start: int
    end: int
    new: str


@dataclass(frozen=True)
class Candidate:
    """One proposed mutation, at ``line``/``col`` (1-based line, 0-based character column)."""

    operator: str
    variant: str
    line: int
    col: int
    edits: tuple[Edit, ...]


@dataclass(frozen=True)
class Site:
    """A candidate with the function or class it is in: ``qualname`` and the line of its ``def``."""

    qualname: str
    def_line: int
    candidate: Candidate


class SourceText:
    """A cell's text with AST positions (UTF-8 byte columns) turned into character offsets."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines = text.splitlines(keepends=True)
        self._starts = [0]
        for line in self._lines:
            self._starts.append(self._starts[-1] + len(line))

    def offset(self, lineno: int, col_bytes: int) -> int:
        line = self._lines[lineno - 1] if lineno <= len(self._lines) else ""
        return self._starts[lineno - 1] + len(line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore"))

    def col(self, lineno: int, col_bytes: int) -> int:
        return self.offset(lineno, col_bytes) - self._starts[lineno - 1]

    def span(self, node: ast.AST) -> tuple[int, int]:
        return (self.offset(node.lineno, node.col_offset),  # type: ignore[attr-defined]
                self.offset(node.end_lineno, node.end_col_offset))  # type: ignore[attr-defined]

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]


def candidate(src: SourceText, operator: str, variant: str, at: ast.AST, *edits: Edit) -> Candidate:
    return Candidate(operator, variant, at.lineno, src.col(at.lineno, at.col_offset), edits)  # type: ignore[attr-defined]


def replace(src: SourceText, node: ast.AST, new: str) -> Edit:
    start, end = src.span(node)
    return Edit(start, end, new)


# ---- constants ---------------------------------------------------------------------------------

def constants(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """Numbers: int ±1, float ×2 and ÷2 (0.0 → 1.0); True ↔ False; a string becomes empty."""
    if not isinstance(node, ast.Constant):
        return
    value = node.value
    news: list[tuple[str, str]] = []
    if isinstance(value, bool):
        news = [("flip", repr(not value))]
    elif isinstance(value, int):
        news = [("plus1", repr(value + 1)), ("minus1", repr(value - 1))]
    elif isinstance(value, float):
        news = [("double", repr(value * 2)), ("half", repr(value / 2))] if value else [("one", "1.0")]
    elif isinstance(value, str):
        news = [("empty", "''")] if value else [("nonempty", "'XX'")]
    for variant, new in news:
        yield candidate(src, "constant", variant, node, replace(src, node, new))


# ---- comparison and boolean operators ----------------------------------------------------------

_COMPARE_SWAP: dict[type[ast.cmpop], tuple[type[ast.cmpop], str]] = {
    ast.Lt: (ast.LtE, r"<"), ast.LtE: (ast.Lt, r"<="), ast.Gt: (ast.GtE, r">"), ast.GtE: (ast.Gt, r">="),
    ast.Eq: (ast.NotEq, r"=="), ast.NotEq: (ast.Eq, r"!="), ast.Is: (ast.IsNot, r"\bis\b"),
    ast.IsNot: (ast.Is, r"\bis\s+not\b"), ast.In: (ast.NotIn, r"\bin\b"), ast.NotIn: (ast.In, r"\bnot\s+in\b"),
}
_OP_TEXT: dict[type[ast.cmpop], str] = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in",
}


def _token_between(src: SourceText, left: ast.AST, right: ast.AST, pattern: str) -> tuple[int, int] | None:
    """The span of the first ``pattern`` match in the text between two operands."""
    gap_start, gap_end = src.span(left)[1], src.span(right)[0]
    match = re.search(pattern, src.text[gap_start:gap_end])
    return None if match is None else (gap_start + match.start(), gap_start + match.end())


def compare(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """``<`` ↔ ``<=``, ``>`` ↔ ``>=``, ``==`` ↔ ``!=``, ``is`` ↔ ``is not``, ``in`` ↔ ``not in``."""
    if not isinstance(node, ast.Compare):
        return
    operands = [node.left, *node.comparators]
    for i, op in enumerate(node.ops):
        new_type, pattern = _COMPARE_SWAP[type(op)]
        span = _token_between(src, operands[i], operands[i + 1], pattern)
        if span is not None:
            variant = f"{type(op).__name__}-{new_type.__name__}"
            yield candidate(src, "compare", variant, operands[i + 1], Edit(*span, _OP_TEXT[new_type]))


_ANY_ALL = {"any": "all", "all": "any"}


def boolean(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """``and`` ↔ ``or`` (all of one expression's), ``not x`` → ``x``, ``any`` ↔ ``all``."""
    if isinstance(node, ast.BoolOp):
        old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
        spans = [_token_between(src, a, b, rf"\b{old}\b") for a, b in zip(node.values, node.values[1:], strict=False)]
        if all(s is not None for s in spans):
            edits = tuple(Edit(s[0], s[1], new) for s in spans if s is not None)
            yield candidate(src, "boolean", f"{old}-{new}", node, *edits)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        text = src.segment(node)
        yield candidate(src, "boolean", "drop-not", node, replace(src, node, text[len("not"):].strip()))
    elif isinstance(node, ast.Call):
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _ANY_ALL:
            end = src.span(func)[1]
            yield candidate(src, "boolean", f"{name}-{_ANY_ALL[name]}", node, Edit(end - len(name), end, _ANY_ALL[name]))


# ---- slices ------------------------------------------------------------------------------------

_LOOSE = (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant, ast.UnaryOp)
_ARITH = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def _shifted(src: SourceText, node: ast.expr, delta: str) -> str:
    text = src.segment(node)
    bare = isinstance(node, _LOOSE) or (isinstance(node, ast.BinOp) and isinstance(node.op, _ARITH))
    return f"{text} {delta}" if bare else f"({text}) {delta}"


def slices(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """A computed bound ±1; any bound or step dropped (except a redundant lower bound of 0)."""
    if not isinstance(node, ast.Slice):
        return
    for name, bound in (("lower", node.lower), ("upper", node.upper), ("step", node.step)):
        if bound is None:
            continue
        if name != "step" and not isinstance(bound, ast.Constant):
            for variant, delta in (("plus1", "+ 1"), ("minus1", "- 1")):
                yield candidate(src, "slice", f"{name}-{variant}", bound, replace(src, bound, _shifted(src, bound, delta)))
        if not (name == "lower" and isinstance(bound, ast.Constant) and bound.value == 0):
            yield candidate(src, "slice", f"drop-{name}", bound, replace(src, bound, ""))


# ---- dtype casts -------------------------------------------------------------------------------

_INT = re.compile(r"^(?:np\.|numpy\.)?(?:u?int(?:8|16|32|64|p|c|_)?|long|longlong)$|^'u?int(?:8|16|32|64)?'$")
_FLOAT = re.compile(r"^(?:np\.|numpy\.)?(?:float(?:16|32|64|_)?|double|single|half)$|^'float(?:16|32|64)?'$")
_CASTS = frozenset({"int", "float", "np.int64", "np.int32", "np.intp", "np.float32", "np.float64"})


def _narrower(type_text: str) -> tuple[str, str] | None:
    """The dtype a cast of ``type_text`` is mutated to: integers to int16 (int16 to int8), floats one size down."""
    prefix = "numpy." if type_text.startswith("numpy.") else "np."
    base = type_text.removeprefix(prefix).strip("'")
    if _INT.match(type_text):
        return ("int8", f"{prefix}int8") if base in ("int16", "int8") else ("int16", f"{prefix}int16")
    if _FLOAT.match(type_text):
        if base in ("float16", "half"):
            return None
        return ("float16", f"{prefix}float16") if base in ("float32", "single") else ("float32", f"{prefix}float32")
    return None


def dtypes(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """``x.astype(T)`` and ``int(x)``-style casts dropped; ``T`` in ``astype(T)`` or ``dtype=T`` narrowed."""
    if not isinstance(node, ast.Call):
        return
    func = node.func
    types: list[ast.expr] = [k.value for k in node.keywords if k.arg == "dtype"]
    if isinstance(func, ast.Attribute) and func.attr == "astype" and node.args:
        types.append(node.args[0])
        yield candidate(src, "dtype", "drop", node, replace(src, node, src.segment(func.value)))
    elif src.segment(func) in _CASTS and len(node.args) == 1 and not node.keywords:
        yield candidate(src, "dtype", "drop", node, replace(src, node, src.segment(node.args[0])))
    for type_node in types:
        narrower = _narrower(src.segment(type_node))
        if narrower is not None:
            yield candidate(src, "dtype", narrower[0], type_node, replace(src, type_node, narrower[1]))


# ---- call arguments ----------------------------------------------------------------------------

def swap_args(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """Two neighbouring positional arguments swapped."""
    if not isinstance(node, ast.Call):
        return
    for i, (a, b) in enumerate(zip(node.args, node.args[1:], strict=False)):
        if isinstance(a, ast.Starred) or isinstance(b, ast.Starred):
            continue
        ta, tb = src.segment(a), src.segment(b)
        if ta != tb:
            yield candidate(src, "swap_args", f"{i}-{i + 1}", a, replace(src, a, tb), replace(src, b, ta))


def drop_kwarg(node: ast.AST, src: SourceText) -> Iterator[Candidate]:
    """One keyword argument dropped, with its comma."""
    if not isinstance(node, ast.Call):
        return
    parts: list[ast.AST] = sorted([*node.args, *node.keywords], key=lambda n: src.span(n)[0])
    for i, part in enumerate(parts):
        if not isinstance(part, ast.keyword) or part.arg is None:
            continue
        start, end = src.span(part)
        if i > 0:
            start = src.span(parts[i - 1])[1]
        elif i + 1 < len(parts):
            end = src.span(parts[i + 1])[0]
        yield candidate(src, "drop_kwarg", part.arg, part, Edit(start, end, ""))


NODE_OPERATORS: tuple[Callable[[ast.AST, SourceText], Iterator[Candidate]], ...] = (
    constants, compare, boolean, slices, dtypes, swap_args, drop_kwarg)


# ---- the walk ----------------------------------------------------------------------------------

def _is_print(node: ast.AST) -> bool:
    call = node.value if isinstance(node, ast.Expr) else node
    return isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "print"


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_NOT_WALKED = frozenset({"annotation", "returns", "decorator_list", "type_comment"})


class _Walker:
    def __init__(self, src: SourceText) -> None:
        self.src = src
        self.sites: list[Site] = []

    def add(self, scope: tuple[str, ...], def_line: int, found: Iterator[Candidate]) -> None:
        self.sites.extend(Site(".".join(scope), def_line, c) for c in found)

    def definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, scope: tuple[str, ...]) -> None:
        if isinstance(node, ast.ClassDef):
            self.body(node.body, scope, node.lineno, owner=node)
            return
        for default in (*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)):
            self.expr(default, scope, node.lineno)
        self.body(node.body, scope, node.lineno, owner=node)

    def body(self, stmts: list[ast.stmt], scope: tuple[str, ...], def_line: int, owner: ast.AST | None = None) -> None:
        for i, stmt in enumerate(stmts):
            if owner is not None and i == 0 and _is_docstring(stmt):
                continue
            if isinstance(stmt, _DEFS) and stmt.name in SKIPPED_FUNCTIONS:
                continue
            if self._deletable(stmt):
                self.add(scope, def_line, iter([candidate(self.src, "delete", "def" if isinstance(stmt, _DEFS) else "stmt",
                                                          stmt, replace(self.src, stmt, "pass"))]))
            if isinstance(stmt, _DEFS):
                self.definition(stmt, (*scope, stmt.name))
            elif not isinstance(stmt, ast.Raise) and not _is_print(stmt):
                self.node(stmt, scope, def_line)

    def _deletable(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, ast.Pass) or _is_print(stmt):
            return False
        if isinstance(stmt, _DEFS) and stmt.decorator_list:
            return False
        # an `elif` is an If node starting at "elif": replacing it with `pass` would not parse
        return not (isinstance(stmt, ast.If) and self.src.segment(stmt).startswith("elif"))

    def node(self, node: ast.AST, scope: tuple[str, ...], def_line: int) -> None:
        for field, value in ast.iter_fields(node):
            if field in _NOT_WALKED or (isinstance(node, ast.Assert) and field == "msg"):
                continue
            items = value if isinstance(value, list) else [value]
            if items and all(isinstance(v, ast.stmt) for v in items) and isinstance(value, list):
                self.body(value, scope, def_line)
                continue
            for item in items:
                if isinstance(item, ast.expr):
                    self.expr(item, scope, def_line)
                elif isinstance(item, ast.AST):
                    self.node(item, scope, def_line)

    def expr(self, node: ast.expr, scope: tuple[str, ...], def_line: int) -> None:
        if isinstance(node, ast.JoinedStr) or _is_print(node):
            return
        for operator in NODE_OPERATORS:
            self.add(scope, def_line, operator(node, self.src))
        self.node(node, scope, def_line)


def sites(root: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, src: SourceText) -> list[Site]:
    """Every candidate mutation inside ``root`` (a top-level def of the cell ``src``), in source order."""
    walker = _Walker(src)
    walker.definition(root, (root.name,))
    return walker.sites
