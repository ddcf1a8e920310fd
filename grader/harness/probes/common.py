"""Helpers probes use to drive student objects without trusting their types."""

from __future__ import annotations

import traceback
from collections.abc import Callable
from typing import Any

import numpy as np


class ProbeError(Exception):
    """The student's object does not offer what the probe needs; the message says what."""


def tensor_class() -> type:
    from tinytorch.core.tensor import Tensor

    return Tensor  # type: ignore[no-any-return]


def as_array(value: Any, what: str) -> np.ndarray:
    """A plain float64 copy of a Tensor or array-like, or ProbeError naming ``what``."""
    data = value
    if not isinstance(value, np.ndarray) and hasattr(value, "data"):
        data = value.data
    if data is None:
        raise ProbeError(f"{what} is None")
    try:
        out = np.array(data, dtype=np.float64, copy=True, subok=False)
    except (TypeError, ValueError) as e:
        raise ProbeError(f"{what} is a {type(value).__name__} that is not numeric ({e})") from None
    return np.ascontiguousarray(out)


def shape_of(value: Any, what: str) -> list[int]:
    return [int(n) for n in as_array(value, what).shape]


def grad_of(tensor: Any, what: str) -> np.ndarray | None:
    """The accumulated gradient as an array, or None when no gradient arrived."""
    grad = getattr(tensor, "grad", None)
    if grad is None:
        return None
    return as_array(grad, f"{what}.grad")


def parameters_of(obj: Any, what: str) -> list[Any]:
    params = getattr(obj, "parameters", None)
    if params is None or not callable(params):
        raise ProbeError(f"{what} has no parameters() method")
    return list(params())


def _shape(param: Any) -> tuple[int, ...]:
    data: Any = getattr(param, "data", None)
    return tuple(np.shape(data))


def inject(obj: Any, values: np.ndarray, what: str) -> Any:
    """Overwrite, in place, the one parameter of ``obj`` whose shape matches ``values``."""
    params = parameters_of(obj, what)
    shapes = [_shape(p) for p in params]
    matches = [p for p, shape in zip(params, shapes, strict=True) if shape == values.shape]
    if not matches:
        raise ProbeError(f"{what}.parameters() has no tensor of shape {values.shape} (found {shapes})")
    param = matches[0]
    param.data[...] = values
    return param


FOREIGN = " from numpy or the Tensor library, not from your own check"


def raised(call: Callable[[], Any], expected: type[BaseException] = ValueError) -> str:
    """What the call raised: ``expected.__name__`` when student code raised it on purpose, the class
    name of anything else, or "none".

    A ValueError that numpy raises by itself (say, a failed broadcast) is not a deliberate
    validation, so it is reported with ``FOREIGN`` appended.
    """
    try:
        call()
    except expected as e:
        frames = traceback.extract_tb(e.__traceback__)
        if frames and not frames[-1].filename.startswith("<cell "):
            return expected.__name__ + FOREIGN
        return expected.__name__
    except Exception as e:
        return type(e).__name__
    return "none"
