"""A likely cause for a valid call that raised: the student's statement, and what the error says.

The probes keep, for each call that raised, the exception's class, the innermost line of the
student's cells and its message (grader.harness.probes.common.caught). When no diagnosis of the
unit explains a failure, and an output the reference computed came back as an exception, the
cause names that statement, quoted from the student's own kept code on the host, and reads the
usual numpy messages (shapes that do not broadcast, float indices, a failed reshape) by pattern.
Only numbers taken from the message are repeated: its words stay the student process's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..channel import CheckOutput
from .asked import raised_class
from .compare import AUX, one_line

RAISED = "aux_raised"


@dataclass(frozen=True)
class Code:
    """The student's kept code on the host: each line by (cell, line), and each cell's label as the
    student finds it (``In [7]``, or the cell's first line)."""

    lines: Mapping[tuple[int, int], str] = field(default_factory=dict)
    labels: Mapping[int, str] = field(default_factory=dict)

    def place(self, cell: int, line: int, function: str = "") -> str:
        where = self.labels.get(cell, f"cell {cell}")
        return f"{where}, line {line}" + (f", in {function}" if function else "")

    def owner(self, cell: int, line: int) -> str:
        """The class whose body holds that line (scanning up to its ``class`` statement), or ""."""
        for at in range(line, 0, -1):
            text = self.lines.get((cell, at))
            if text is None:
                continue
            m = re.match(r"^class\s+(\w+)", text)
            if m:
                return m[1]
            if text and not text[0].isspace() and not text.startswith(("#", "@", ")", "]", "}")) and at != line:
                return ""  # a top-level statement that is no class: the line is not in one
        return ""

    def condition(self, cell: int, line: int) -> str:
        """The ``if`` that guards a ``raise`` at that line: the nearest line above, less indented."""
        raised = self.lines.get((cell, line), "")
        indent = len(raised) - len(raised.lstrip())
        for at in range(line - 1, max(0, line - 8), -1):
            text = self.lines.get((cell, at), "")
            stripped = text.strip()
            if stripped and len(text) - len(stripped) < indent:
                return stripped if stripped.startswith(("if ", "elif ")) else ""
        return ""

    def relabel(self, text: str) -> str:
        """Our own text (a sandbox's "cell N, line L, in f", a host note) with every "cell N" as the
        student finds that cell."""
        return re.sub(r"\bcell (\d+)\b", lambda m: self.labels.get(int(m[1]), m[0]), text)

Meaning = Callable[[str, str], "str | None"]  # a unit's own reading of (exception class, message)
_WHERE = re.compile(r"^cell (\d+), line (\d+), in (\w+)$")
_SHAPE = r"\(([\d, ]*)\)"


@dataclass(frozen=True)
class Raised:
    kind: str  # "value": the call was meant to return; "refusal": it may have been meant to raise
    type: str
    cell: int | None
    line: int | None
    function: str
    message: str


def _parse(entry: Any) -> Raised | None:
    if not isinstance(entry, str):
        return None
    parts = entry.split("|", 5)
    if len(parts) != 6:
        return None
    kind, kind_type, cell, line, function, message = parts
    return Raised(kind, kind_type, int(cell) if cell.isdigit() else None, int(line) if line.isdigit() else None,
                  function if function.isidentifier() else "", message)


def shapes(message: str) -> tuple[tuple[int, ...], tuple[int, ...], str] | None:
    """The two shapes of a failed broadcast ("operands") or assignment ("into"), from numpy's message."""
    for pattern, how in ((rf"operands could not be broadcast together with shapes {_SHAPE} {_SHAPE}", "operands"),
                         (rf"could not broadcast input array from shape {_SHAPE} into shape {_SHAPE}", "into")):
        if m := re.search(pattern, message):
            a, b = (tuple(int(n) for n in g.replace(" ", "").split(",") if n) for g in (m[1], m[2]))
            return a, b, how
    return None


def _meaning(kind: str, message: str) -> str:
    """What a usual numpy or Python error message says, in the assignment's terms (numbers only)."""
    if m := re.search(rf"operands could not be broadcast together with shapes {_SHAPE} {_SHAPE}", message):
        return (f"arrays of shapes ({m[1]}) and ({m[2]}) were combined, and they do not line up (each axis, "
                "counted from the right, must be equal or 1)")
    if m := re.search(rf"could not broadcast input array from shape {_SHAPE} into shape {_SHAPE}", message):
        a, b = (tuple(n.strip() for n in g.split(",") if n.strip()) for g in (m[1], m[2]))
        if len(a) == 2 and a == b[::-1]:
            return (f"an array of shape ({m[1]}) was written into a place of shape ({m[2]}): its axes are swapped "
                    "(np.meshgrid's default indexing='xy' swaps them: use indexing='ij', or transpose)")
        return f"an array of shape ({m[1]}) was written into a place of shape ({m[2]})"
    if m := re.search(rf"non-broadcastable output operand with shape {_SHAPE} doesn't match the broadcast shape "
                      rf"{_SHAPE}", message):
        return (f"an in-place update (+=) of a place of shape ({m[1]}) with values of shape ({m[2]}): the right side "
                "holds more rows than the place it adds into (flatten the ids and the gradient to (N,) and (N, D) "
                "first)")
    if m := re.search(r"object has no attribute '(\w+)'", message):
        return f"the object has no attribute {m[1]!r}: a misspelt name? (an attribute exists once __init__ sets it)"
    if m := re.search(rf"cannot reshape array of size (\d+) into shape {_SHAPE}", message):
        return f"{m[1]} values cannot be reshaped to ({m[2]})"
    if "indices must be of integer" in message or "only integers, slices" in message:
        return ("an array of floats was used as indices: Tensor data is float32, so cast the ids to integers "
                "(.astype(int)) before indexing")
    if m := re.search(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", message):
        return f"index {m[1]} was read on an axis of size {m[3]}"
    if m := re.search(r"(too many|not enough) values to unpack \(expected (\d+)(?:, got (\d+))?\)", message):
        return f"unpacking expected {m[2]} values" + (f" but got {m[3]}" if m[3] else "")
    if kind == "MemoryError":
        return "it ran out of memory"
    return ""


def describe(kind: str, cell: int | None, line: int | None, function: str, message: str, code: Code,
             meaning: Meaning | None = None, targets: tuple[str, ...] = ()) -> str:
    """``<statement>`` (cell, line, function) raised <kind>: what the message says (the unit's
    reading first, which knows the inputs: a whole table where seq_len rows belong, say). A
    ``raise`` of the student's own is their check refusing valid input; inside another class than
    the check's ``targets``, that class refused what the target handed it."""
    statement = code.lines.get((cell, line), "").strip() if cell is not None and line is not None else ""
    place = code.place(cell, line, function) if cell is not None and line is not None else ""
    head = f"`{one_line(statement, 120)}` ({place})" if statement else (f"your code ({place})" if place else "")
    if not head:  # raised before reaching the student's code: a method the call needs is missing, say
        said = (meaning(kind, message) if meaning else None) or _meaning(kind, message)
        return f"the call raised {kind} before reaching your code: {said}" if said and kind == "AttributeError" else ""
    if statement.startswith("raise"):
        owner = code.owner(cell, line) if cell is not None and line is not None else ""
        if owner and targets and owner not in targets:
            return (f"{head}: {owner}'s own check refused what {' and '.join(targets)} handed it, so the bug is in "
                    f"how {targets[0]} calls {owner} (the input it passes has the wrong shape or value)")
        test = code.condition(cell, line) if cell is not None and line is not None else ""
        return (f"your own check `{one_line(test, 120)}` ({place}) refused a valid input: its condition, or a value "
                "it reads (an attribute set in __init__, say), is wrong") if test else \
            f"{head}: your own check refused a valid input"
    said = (meaning(kind, message) if meaning else None) or _meaning(kind, message)
    return f"{head} raised {kind} on valid input" + (f": {said}" if said else "")


def cause(got: CheckOutput, expected: CheckOutput, code: Code, meaning: Meaning | None = None,
          targets: tuple[str, ...] = ()) -> str | None:
    """The statement behind the first output the reference computed that came back as an exception."""
    listed = got.facts.get(RAISED)
    entries = [r for r in map(_parse, listed if isinstance(listed, list) else []) if r is not None]
    if not entries:
        return None
    for name, value in got.facts.items():
        if name.startswith(AUX):
            continue
        kind = raised_class(value)
        want = expected.facts.get(name)
        if kind is None or (raised_class(want) is not None):
            continue
        if name not in expected.arrays and name not in expected.facts:
            continue
        wanted = "value" if str(value).startswith("raised ") else "refusal"
        found = (next((r for r in entries if r.type == kind and r.kind == wanted), None)
                 or next((r for r in entries if r.type == kind), None))
        if found is not None and (text := describe(kind, found.cell, found.line, found.function, found.message, code,
                                                     meaning, targets)):
            return text
    return None


def error_cause(got: CheckOutput, code: Code, meaning: Meaning | None = None,
                targets: tuple[str, ...] = ()) -> str | None:
    """The same for a check whose probe raised (outcome error or oom)."""
    if got.error is None or not got.error.where:
        return None
    m = _WHERE.match(got.error.where)
    if m is None:
        return None
    return describe(got.error.type, int(m[1]), int(m[2]), m[3], got.error.message, code, meaning, targets) or None
