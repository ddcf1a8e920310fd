"""Sandbox side of the toy unit: call the student's relu and return plain arrays."""

from __future__ import annotations

from typing import Any

import numpy as np

from grader.harness.probes import Inputs, Outputs, Probe


def _inputs(rng: np.random.Generator) -> Inputs:
    return {"x": np.round(rng.normal(size=(4, 5)), 3)}


def _values(ns: dict[str, Any], inputs: Inputs) -> Outputs:
    return {"y": np.asarray(ns["relu"](inputs["x"].copy()), dtype=np.float64)}


def _keeps_input(ns: dict[str, Any], inputs: Inputs) -> Outputs:
    x = inputs["x"].copy()
    ns["relu"](x)
    return {"x_after": x}


PROBES = {
    "relu_values": Probe("relu_values", ("relu",), _inputs, lambda i: f"relu(x) on an array of shape {i['x'].shape}",
                         _values),
    "relu_keeps_input": Probe("relu_keeps_input", ("relu",), _inputs, lambda i: "relu(x), then x itself", _keeps_input),
}
