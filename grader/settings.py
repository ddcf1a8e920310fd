"""Every ``GRADER_*`` environment variable, read in one place into one typed record.

| variable | meaning |
|---|---|
| ``GRADER_CACHE`` | per-user cache: bundles, expected outputs, the daemon's socket (``~/.cache/tinytorch-grader``) |
| ``GRADER_SEED_SECRET`` | the course's key for the inputs of non-visible checks (students must not know it; ``grader.secret``) |
| ``GRADER_NO_DAEMON`` | ``1``: never use or start the warm grading daemon |
| ``GRADER_DAEMON_IDLE_S`` | seconds the daemon waits for a request before it exits (default 900) |
| ``GRADER_IMAGE_ONLINE`` | ``1``: build the Docker image ``FROM python:3.11-slim`` instead of with debootstrap |
| ``GRADER_LOCAL_MODE`` | ``fallback`` or ``none``: force the local backend's mode (tests of those modes) |
| ``GRADER_MODULE`` | the course module to grade when the notebook does not say (grader.modules.choose) |
| ``GRADER_AUTOGRADER_ROOT`` | Gradescope's autograder folder (default ``/autograder``) |

The process reads them once; ``reload()`` reads them again (tests that change the environment).
The table is ``variables_table()``, made from ``EnvironmentSettings``' fields (a test keeps them equal).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

TRUE = ("1", "true", "yes")


def _variable(name: str, meaning: str) -> Any:
    """A field read from the variable ``name``; ``meaning`` is its row in the table above."""
    return field(metadata={"variable": name, "meaning": meaning})


@dataclass(frozen=True)
class EnvironmentSettings:
    """What the environment says to every grader process (the CLI, the daemon, tito, the pytest
    plugin, a sandbox's host side); the service's own settings are grader.service.settings'."""

    cache: Path = _variable("GRADER_CACHE", "per-user cache: bundles, expected outputs, the daemon's socket "
                                            "(``~/.cache/tinytorch-grader``)")
    seed_secret: bytes | None = _variable(  # None when unset (grader.secret says what is used then)
        "GRADER_SEED_SECRET", "the course's key for the inputs of non-visible checks (students must not know it; "
                              "``grader.secret``)")
    daemon: bool = _variable("GRADER_NO_DAEMON", "``1``: never use or start the warm grading daemon")
    daemon_idle_s: float = _variable("GRADER_DAEMON_IDLE_S", "seconds the daemon waits for a request before it "
                                                             "exits (default 900)")
    image_online: bool = _variable("GRADER_IMAGE_ONLINE", "``1``: build the Docker image ``FROM python:3.11-slim`` "
                                                          "instead of with debootstrap")
    local_mode: str | None = _variable("GRADER_LOCAL_MODE", "``fallback`` or ``none``: force the local backend's "
                                                            "mode (tests of those modes)")
    module: str | None = _variable("GRADER_MODULE", "the course module to grade when the notebook does not say "
                                                    "(grader.modules.choose)")
    autograder_root: Path | None = _variable("GRADER_AUTOGRADER_ROOT", "Gradescope's autograder folder (default "
                                                                       "``/autograder``)")

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> EnvironmentSettings:
        try:
            idle = float(environ.get("GRADER_DAEMON_IDLE_S", "900"))
        except ValueError:
            idle = 900.0
        mode = environ.get("GRADER_LOCAL_MODE")
        root = environ.get("GRADER_AUTOGRADER_ROOT")
        return cls(
            cache=Path(environ.get("GRADER_CACHE")
                       or Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinytorch-grader"),
            seed_secret=environ["GRADER_SEED_SECRET"].encode() if environ.get("GRADER_SEED_SECRET") else None,
            daemon=environ.get("GRADER_NO_DAEMON", "").strip().lower() not in TRUE,
            daemon_idle_s=idle,
            image_online=environ.get("GRADER_IMAGE_ONLINE", "").strip().lower() in TRUE,
            local_mode=mode if mode in ("fallback", "none") else None,
            autograder_root=Path(root) if root else None,
            module=environ.get("GRADER_MODULE", "").strip() or None,
        )


@lru_cache(maxsize=1)
def settings() -> EnvironmentSettings:
    """This process's settings, read from the environment on first use."""
    return EnvironmentSettings.from_environ(os.environ)


def reload() -> EnvironmentSettings:
    """Read the environment again (after a test changed it)."""
    settings.cache_clear()
    return settings()


def variables_table() -> str:
    """The table of this module's docstring, from the fields: one row per variable."""
    rows = ["| variable | meaning |", "|---|---|"]
    rows += [f"| ``{f.metadata['variable']}`` | {f.metadata['meaning']} |" for f in fields(EnvironmentSettings)]
    return "\n".join(rows) + "\n"
