import numpy as np


def relu(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = np.maximum(x, 0.0)
    return out
