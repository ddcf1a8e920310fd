"""Fast nbformat-v4 schema validation: nbformat's own JSON schemas, compiled once and cached.

``nbformat.validate`` costs about 150 ms per process (imports plus schema compilation); this
costs a few ms after the first run. Older notebooks still go through nbformat to be upgraded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import SubmissionError

LATEST_MINOR = 5


def _schema_path(minor: int) -> Path:
    spec = importlib.util.find_spec("nbformat")
    if spec is None or not spec.submodule_search_locations:
        raise SubmissionError("nbformat is not installed; pip install nbformat")
    return Path(next(iter(spec.submodule_search_locations))) / "v4" / f"nbformat.v4.{minor}.schema.json"


@lru_cache(maxsize=8)
def _validator(minor: int) -> ModuleType:
    from .paths import cache_root

    schema_text = _schema_path(minor).read_bytes()
    digest = hashlib.sha256(schema_text).hexdigest()[:16]
    cached = cache_root() / "nbschema" / f"v4_{minor}_{digest}.py"
    if not cached.exists():
        import fastjsonschema

        code = fastjsonschema.compile_to_code(json.loads(schema_text))
        cached.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cached.parent, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(code)
        os.replace(tmp, cached)
    spec = importlib.util.spec_from_file_location(f"_nbschema_v4_{minor}", cached)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def validate_v4(nb: dict[str, Any]) -> str | None:
    """None if ``nb`` is a schema-valid v4 notebook, else a one-line reason."""
    minor = nb.get("nbformat_minor")
    minor = min(minor, LATEST_MINOR) if isinstance(minor, int) and minor >= 0 else LATEST_MINOR
    try:
        _validator(minor).validate(nb)
    except Exception as e:  # fastjsonschema.JsonSchemaValueException, without importing it eagerly
        message = getattr(e, "message", str(e))
        return str(message).splitlines()[0][:200]
    return None
