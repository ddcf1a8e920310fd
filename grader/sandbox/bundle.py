"""The sandbox bundle: the harness and the course runtimes, and nothing else; or one unit's bundle
(the harness, its probes and its runtime), whose hash keys that unit's caches.

It is what student code may import besides numpy. The shared bundle (``ensure_bundle()``) is what
the local zygote runs from and what the Docker image holds: it has **no unit** in it, so installing
or editing a unit moves neither (only the harness or a runtime does). A job brings its own unit's
probes as text (``Job.probe_files``, served by grader/harness/unitfiles.py at their import path).
A unit's own bundle (``ensure_bundle(name)``) is what its trusted reference worker runs from, and
``bundle_hash(name)`` keys its reference cache and its shipped expected outputs. Files keep their
import paths (``grader/harness/...``, ``grader/modules/<name>/probes/...``, ``tinytorch/...``);
every package above them is an empty ``__init__.py``: the reference solutions, the rubrics, the
judges and the rest of the grader are deliberately not in it. Cached by content hash.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path

from ..paths import cache_root, harness_parent, runtime_dir

STUB = b'"""Part of the grader\'s sandbox bundle; the rest of this package stays on the host."""\n'


def _tree(base: Path, prefix: str) -> list[tuple[str, bytes]]:
    return [(f"{prefix}/{f.relative_to(base).as_posix()}", f.read_bytes()) for f in sorted(base.rglob("*.py"))]


def _sources(module: str | None = None) -> list[tuple[str, bytes]]:
    """(path inside the bundle, content) for every file the bundle holds: the harness and the
    runtimes of every installed unit (no unit's probes), or of ``module`` alone (the harness, its
    probes, its runtime)."""
    from .. import modules
    from ..runtime import require

    files: dict[str, bytes] = {"grader/__init__.py": STUB}
    files.update(_tree(harness_parent() / "harness", "grader/harness"))
    if module is None:
        runtimes = {unit.runtime for unit in modules.installed().values()}
    else:
        unit = modules.get(module)
        require(unit)  # the unit's own bundle: only on a runtime version it was written for
        parts = unit.package.split(".")
        for depth in range(1, len(parts) + 1):
            files.setdefault("/".join(parts[:depth]) + "/__init__.py", STUB)
        files.update(_tree(unit.probes_dir, "/".join(parts) + "/probes"))
        runtimes = {unit.runtime}
    for runtime in sorted(runtimes):
        files.update(_tree(runtime_dir() / runtime, runtime))
    return sorted(files.items())


def bundle_hash(module: str | None = None) -> str:
    """The content hash of the shared bundle (harness and runtimes: the image and the zygote), or of
    ``module``'s own (what that unit's expected outputs depend on; another unit's change leaves it
    alone)."""
    return _digest(_sources(module))


def _content_hash(bundle: Path) -> str:
    """The hash of what a cached bundle holds now (extra files count too)."""
    return _digest((f.relative_to(bundle).as_posix(), f.read_bytes()) for f in sorted(bundle.rglob("*")) if f.is_file())


def _digest(files: Iterable[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for rel, data in files:
        h.update(rel.encode() + b"\0" + data + b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=8)
def ensure_bundle(module: str | None = None) -> Path:
    """The bundle directory (the shared one, or ``module``'s own), made once per content hash."""
    sources = _sources(module)
    expected = _digest(sources)
    dest = cache_root() / f"bundle-{expected}"
    if dest.is_dir():
        if _content_hash(dest) == expected:
            return dest
        shutil.rmtree(dest, ignore_errors=True)  # changed since it was made: never run it
    tmp = Path(tempfile.mkdtemp(prefix=".bundle-", dir=dest.parent))
    for rel, data in sources:
        target = tmp / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    try:
        tmp.rename(dest)
    except OSError:  # another grader process won the race; theirs is identical
        shutil.rmtree(tmp, ignore_errors=True)
    os.chmod(dest, 0o755)
    return dest
