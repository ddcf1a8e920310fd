"""Helpers probes use to drive student objects without trusting their types."""

from __future__ import annotations

import inspect
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


NOT_A_TENSOR = "parameters() returns plain arrays (each Tensor's .data), not the Tensors"


def inject(obj: Any, values: np.ndarray, what: str) -> Any:
    """Overwrite, in place, the one parameter of ``obj`` whose shape matches ``values``; when
    parameters() has none, a Tensor attribute of ``obj`` (or of one of its attributes) of that
    shape, so that a parameters() that leaves a table out costs only the checks about parameters."""
    params = parameters_of(obj, what)
    if params and all(isinstance(p, np.ndarray) for p in params):
        raise ProbeError(f"{what}.{NOT_A_TENSOR}: return [self.weight], the Tensor an optimizer can update")
    shapes = [_shape(p) for p in params]
    matches = [p for p, shape in zip(params, shapes, strict=True) if shape == values.shape] or _held(obj, values.shape)
    if not matches:
        raise ProbeError(f"{what}.parameters() has no tensor of shape {values.shape} (found {shapes})")
    param = matches[0]
    param.data[...] = values
    return param


def held_tensors(obj: Any) -> list[Any] | None:
    """Every Tensor held by ``obj`` or by one of its attributes, once each, in attribute order;
    None when the attributes cannot be read."""
    T, found, seen = tensor_class(), [], set()
    try:
        for holder in (obj, *(v for v in vars(obj).values() if hasattr(v, "__dict__"))):
            for value in vars(holder).values():
                if isinstance(value, T) and id(value) not in seen:
                    seen.add(id(value))
                    found.append(value)
    except Exception:
        return None
    return found


def _held(obj: Any, shape: tuple[int, ...]) -> list[Any]:
    """The first Tensor of ``shape`` among the attributes of ``obj`` and of its attributes."""
    return [t for t in held_tensors(obj) or () if _shape(t) == shape][:1]


FOREIGN = " from numpy or the Tensor library, not from your own check"
RAISED = "aux_raised"  # the fact that lists what the probe's calls raised (grader.judge.crash)
_caught: list[str] = []


def caught(e: BaseException, kind: str) -> None:
    """Keep what a call raised and where: the innermost line of the student's cells, then the
    exception's message, as "kind|type|cell|line|function|message" (kind: "value" for a call
    meant to return something, "refusal" for one that may be meant to raise)."""
    if len(_caught) >= 8:
        return
    cell, line, name = "", "", ""
    for frame in traceback.extract_tb(e.__traceback__):
        if frame.filename.startswith("<cell ") and frame.filename.endswith(">"):
            cell, line, name = frame.filename[6:-1], str(frame.lineno), frame.name
    try:
        message = " ".join(str(e).split())
    except Exception:
        message = ""
    _caught.append(f"{kind}|{type(e).__name__[:60]}|{cell}|{line}|{name[:40]}|{message}"[:200])


def take_caught() -> list[str]:
    """What the calls of one probe raised, in order; the list starts afresh."""
    found = list(_caught)
    _caught.clear()
    return found


def raised(call: Callable[[], Any], expected: type[BaseException] = ValueError) -> str:
    """What the call raised: ``expected.__name__`` when student code raised it on purpose, the class
    name of anything else, or "none".

    A ValueError that numpy raises by itself (say, a failed broadcast) is not a deliberate
    validation, so it is reported with ``FOREIGN`` appended.
    """
    try:
        call()
    except expected as e:
        caught(e, "refusal")
        return exception_name(e, expected)
    except Exception as e:
        caught(e, "refusal")
        return type(e).__name__
    return "none"


def exception_name(e: BaseException, deliberate: type[BaseException] = ValueError) -> str:
    """``deliberate.__name__`` for that class or a subclass (with ``FOREIGN`` appended when it was
    raised outside the student's cells), else the exception's own class name."""
    if not isinstance(e, deliberate):
        return type(e).__name__
    frames = traceback.extract_tb(e.__traceback__)
    if frames and not frames[-1].filename.startswith("<cell "):
        return deliberate.__name__ + FOREIGN
    return deliberate.__name__


def attempt(call: Callable[[], Any], what: str) -> np.ndarray | str:
    """The call's result as an array, or a sentence saying why there is none ("raised X", with
    ``FOREIGN`` for numpy's own ValueError): one failing call then costs only its own output."""
    try:
        return as_array(call(), what)
    except ProbeError as e:  # the probe's own sentence (the result is None, not numeric, ...)
        return str(e)[:500]
    except Exception as e:
        caught(e, "value")
        return "raised " + exception_name(e)


def takes_parameter(obj: Any, method: str, name: str) -> bool:
    """True when ``obj.method`` names a parameter ``name`` (``**kwargs`` alone does not count)."""
    fn = getattr(obj, method, None)
    try:
        return fn is not None and name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def dyadic(rng: np.random.Generator, shape: tuple[int, ...], scale: int = 64) -> np.ndarray:
    """Values k/16, exact in float32, so sums of them match the reference to the last bit."""
    return rng.integers(-scale, scale + 1, size=shape).astype(np.float64) / 16.0


def token_ids(rng: np.random.Generator, vocab: int, shape: tuple[int, ...]) -> np.ndarray:
    """Random ids of ``shape`` that always touch both ends of the table (0 and vocab - 1)."""
    ids = rng.integers(0, vocab, size=shape)
    flat = ids.reshape(-1)
    flat[0], flat[-1] = 0, vocab - 1
    return ids.astype(np.float64)


def fmt(a: np.ndarray) -> str:
    return np.array2string(np.asarray(a), separator=", ", max_line_width=200, threshold=12)
