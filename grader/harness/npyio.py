"""Plain ``.npy`` writing for probe outputs (the host reads them with its own strict parser)."""

from __future__ import annotations

import os

import numpy as np


def write_arrays(directory: str, arrays: dict[str, np.ndarray]) -> None:
    """Write each array as ``<name>.npy`` (float64, C order)."""
    os.makedirs(directory, exist_ok=True)
    for name, value in arrays.items():
        tmp = os.path.join(directory, f".{name}.tmp")
        with open(tmp, "wb") as f:
            np.lib.format.write_array(f, np.ascontiguousarray(value, dtype=np.float64), allow_pickle=False)
        os.replace(tmp, os.path.join(directory, f"{name}.npy"))
