"""Host side of the toy unit: one comparator and one likely cause."""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.unit import Cause, CheckOutput, Mismatch


def _unchanged(got: CheckOutput, expected: CheckOutput, inputs: dict[str, Any]) -> list[Mismatch]:
    after = got.arrays.get("x_after")
    if after is not None and np.array_equal(after, inputs["x"]):
        return []
    return [Mismatch("x_after", "the input array was changed in place")]


def _clipped_the_wrong_side(got: CheckOutput, expected: CheckOutput, inputs: dict[str, Any]) -> Cause | None:
    y = got.arrays.get("y")
    if y is not None and np.allclose(y, np.minimum(inputs["x"], 0)):
        return Cause("the positive values were set to 0 instead of the negative ones (np.minimum for np.maximum?)")
    return None


COMPARATORS = {"unchanged": _unchanged}
DIAGNOSES = {"relu_values": _clipped_the_wrong_side}
