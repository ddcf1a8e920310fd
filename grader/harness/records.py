"""The result records of the harness: their schema version and their files, defined once and
imported by both sides (the harness writes them; ``grader.channel`` validates them on the host).

Files in a job's ``out/``, every JSON record carrying ``"schema": SCHEMA``:

- ``import.json``: ``chunk_errors`` (cell, line, defines, error), ``defined`` (names);
- ``<check>.json``: ``check``, ``status`` (ok/error/oom), ``facts``, ``arrays`` (names), ``error``,
  ``duration_ms``; with ``<check>/<name>.npy`` for each array (float64, C order, no pickle);
- ``<check>.status.json``: written by the harness's parent when the check's own process did not
  report: ``check``, ``status`` (timeout/crashed/oom), ``signal``, ``exit_code``, ``reason``,
  ``duration_ms``.

Standard library only: this runs in the sandbox.
"""

from __future__ import annotations

from typing import Any

SCHEMA = 1
IMPORT = "import.json"


def check_file(check_id: str) -> str:
    return f"{check_id}.json"


def status_file(check_id: str) -> str:
    return f"{check_id}.status.json"


def stamped(record: dict[str, Any]) -> dict[str, Any]:
    """The record as written: with this schema's version."""
    return {"schema": SCHEMA, **record}
