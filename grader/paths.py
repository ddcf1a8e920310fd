"""Where the course runtime and the caches live, in a source checkout or an installed wheel."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _data_root() -> Path:
    installed = _PACKAGE / "_data"
    return installed if installed.is_dir() else _PACKAGE.parent


def runtime_dir() -> Path:
    """The course runtime (``tinytorch`` package) that student code imports in the sandbox."""
    return _data_root() / "reference" / "runtime"


def harness_parent() -> Path:
    """The directory that holds the ``harness`` package (added to the sandbox's sys.path)."""
    return _PACKAGE


def cache_root() -> Path:
    """Per-user cache: sandbox bundles, compiled schemas, expected outputs, the daemon's socket.
    ``GRADER_CACHE``, else ``tinytorch-grader`` in the user's cache directory (``XDG_CACHE_HOME``,
    by default ``~/.cache``): nothing in the working directory, the checkout or site-packages."""
    from .settings import settings

    return settings().cache


def expected_cache_dir() -> Path:
    """Cached reference outputs: trusted data that every sandbox must be kept away from."""
    return cache_root() / "expected"
