"""Put the course runtime (`tinytorch`) and the reference solution (`embeddings`) on sys.path."""

from __future__ import annotations

import sys
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[2] / "reference"
RUNTIME = REFERENCE / "runtime"
SOLUTION = REFERENCE / "solution"

for _path in (SOLUTION, RUNTIME):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
