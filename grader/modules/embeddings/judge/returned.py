"""A backward that returns its gradient bare instead of in a one-element tuple, read from the error
the course runtime raises for it.

Both course generations zip a node's inputs with what its backward returned. A bare array is
iterated row by row, so the weight receives the gradient's first row: the newer generation (and our
runtime) refuses its shape, the older one broadcasts it over every row. Either way the gradient is
wrong, and the fix is one comma.
"""

from __future__ import annotations

import re

from grader.unit import CheckOutput

# reference/runtime/tinytorch/core/tensor.py, _fit_to_shape: "<node> gave a gradient of shape ... for a tensor of shape ..."
_ROW_FOR_TABLE = re.compile(r"gave a gradient of shape \((?P<row>[\d, ]*)\) for a tensor of shape \((?P<table>[\d, ]+)\)")


def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.replace(" ", "").split(",") if d)


def bare_gradient(got: CheckOutput) -> str | None:
    """The cause when the error says a tensor got one row of its own gradient."""
    if got.error is None:
        return None
    found = _ROW_FOR_TABLE.search(got.error.message)
    if found is None:
        return None
    row, table = _dims(found["row"]), _dims(found["table"])
    if len(table) < 2 or row != table[1:]:
        return None
    return (f"the backward returned the gradient itself, not a one-element tuple: the inputs are zipped with what "
            f"backward returns, so the weight {table} received only the gradient's first row {row}; "
            "return (grad_weight,) with its trailing comma")
