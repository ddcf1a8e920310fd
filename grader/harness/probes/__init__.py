"""The probe interface. Each course-module unit's ``probes`` package exports ``PROBES``.

A probe has three parts:
- ``make_inputs(rng)`` (host side): the arrays and sizes it will be called with;
- ``describe(inputs)`` (host side): one line saying what was called, for feedback;
- ``run(namespace, inputs)`` (sandbox side): build the student's objects, call them, and return
  plain outputs: ndarrays (compared numerically) and facts (str/int/float/bool/None/lists).
  Outputs named ``aux_*`` are context for the judge's diagnoses (what the student's own Layer
  returns, say) and are never compared with the reference's.

This package is the one face of the grader a unit's probes import (the sandbox side; the host side
imports ``grader.unit``): the probe interface and the helpers of ``common`` that drive student
objects without trusting their types. Its ``__all__`` is pinned (tests/test_unit_api.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import (
    FOREIGN,
    NOT_A_TENSOR,
    ProbeError,
    as_array,
    attempt,
    caught,
    dyadic,
    exception_name,
    fmt,
    grad_of,
    held_tensors,
    inject,
    parameters_of,
    raised,
    shape_of,
    takes_parameter,
    tensor_class,
    token_ids,
)

__all__ = [
    "FOREIGN",
    "NOT_A_TENSOR",
    "Inputs",
    "Outputs",
    "Probe",
    "ProbeError",
    "as_array",
    "attempt",
    "caught",
    "decode_inputs",
    "dyadic",
    "encode_inputs",
    "exception_name",
    "fmt",
    "grad_of",
    "held_tensors",
    "inject",
    "load_probes",
    "parameters_of",
    "raised",
    "shape_of",
    "takes_parameter",
    "tensor_class",
    "token_ids",
]

Inputs = dict[str, Any]
Outputs = dict[str, Any]


@dataclass(frozen=True)
class Probe:
    name: str
    needs: tuple[str, ...]
    make_inputs: Callable[[np.random.Generator], Inputs]
    describe: Callable[[Inputs], str]
    run: Callable[[dict[str, Any], Inputs], Outputs]

    @staticmethod
    def decode(encoded: dict[str, Any]) -> Inputs:
        return decode_inputs(encoded)

    @staticmethod
    def split(outputs: Outputs) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """Separate array outputs from JSON facts; anything else is a probe bug."""
        facts: dict[str, Any] = {}
        arrays: dict[str, np.ndarray] = {}
        for key, value in outputs.items():
            if type(value) is np.ndarray:
                arrays[key] = value
            elif value is None or type(value) in (str, int, float, bool):
                facts[key] = value
            elif type(value) in (list, tuple) and all(type(v) in (str, int, float, bool) for v in value):
                facts[key] = list(value)
            else:
                raise TypeError(f"probe output {key!r} has unsupported type {type(value).__name__}")
        return facts, arrays


def encode_inputs(inputs: Inputs) -> dict[str, Any]:
    """JSON-ready inputs: arrays become ``{"array": [...], "dtype": ...}``."""
    return {
        k: {"array": v.tolist(), "dtype": str(v.dtype)} if isinstance(v, np.ndarray) else v
        for k, v in inputs.items()
    }


def decode_inputs(encoded: dict[str, Any]) -> Inputs:
    return {
        k: np.array(v["array"], dtype=v["dtype"]) if isinstance(v, dict) and "array" in v else v
        for k, v in encoded.items()
    }


def load_probes(package: str) -> dict[str, Probe]:
    """The ``PROBES`` of a unit's probes package, by dotted path (``grader.modules.<name>.probes``):
    the same path on the host and in the sandbox bundle."""
    mod = importlib.import_module(package)
    return dict(getattr(mod, "PROBES", {}))
