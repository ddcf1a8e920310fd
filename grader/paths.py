"""Where the course runtime and the caches live, in a source checkout or an installed wheel."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
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
    by default ``~/.cache``): nothing in the working directory, the checkout or site-packages.

    The folder is made (mode 0700) and tried once per process: one that cannot be made or written
    (a read-only disk, a path through a file, a full disk) gives way to a private temporary folder
    for this process, removed at its exit, and one line on stderr says so (``cache_is_temporary``)."""
    from .settings import settings

    configured = settings().cache
    usable = _USABLE.get(configured)
    if usable is None:
        usable = _USABLE[configured] = _usable(configured)
    return usable


_USABLE: dict[Path, Path] = {}
_TEMPORARY: set[Path] = set()


def cache_is_temporary() -> bool:
    """Whether this process's cache is a temporary folder (the configured one could not be used):
    nothing is kept for the next run, so no daemon is started for it either."""
    return cache_root() in _TEMPORARY


def _usable(folder: Path) -> Path:
    try:
        make_private_dir(folder)
        probe, name = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(probe)
        os.unlink(name)
        return folder
    except OSError as e:
        reason = e.strerror or type(e).__name__
    temporary = Path(tempfile.mkdtemp(prefix="tinytorch-grader-cache-"))  # mode 0700
    _TEMPORARY.add(temporary)
    atexit.register(shutil.rmtree, temporary, True)
    note = (f"note: the grader's cache folder {folder} cannot be used ({reason}); this run keeps its cache in a "
            f"temporary folder instead (set GRADER_CACHE to a writable folder to keep it between runs)")
    encoding = getattr(sys.stderr, "encoding", None) or "utf-8"  # an ASCII terminal too
    print(note.encode(encoding, "replace").decode(encoding), file=sys.stderr)
    return temporary


def make_private_dir(folder: Path) -> None:
    """``folder`` and its parents; a folder made here is mode 0700 (one that exists is left as it is)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)


def expected_cache_dir() -> Path:
    """Cached reference outputs: trusted data that every sandbox must be kept away from."""
    return cache_root() / "expected"
