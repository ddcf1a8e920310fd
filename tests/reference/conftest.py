"""Put the course runtime (`tinytorch`) on sys.path and the module-11 reference solution in
sys.modules as `embeddings`, for the tests of the solution and the runtime themselves."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNTIME = ROOT / "reference" / "runtime"
SOLUTION = ROOT / "grader" / "modules" / "embeddings" / "reference" / "solution.py"

if str(RUNTIME) not in sys.path:
    sys.path.insert(0, str(RUNTIME))
if "embeddings" not in sys.modules:
    _spec = importlib.util.spec_from_file_location("embeddings", SOLUTION)
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["embeddings"] = _module
    _spec.loader.exec_module(_module)
