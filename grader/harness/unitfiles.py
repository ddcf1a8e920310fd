"""A unit's probes, imported from the job rather than from the bundle.

The sandbox bundle (and so the Docker image and the local zygote) holds the harness and the
course runtimes, no unit: each job carries its unit's probes package as source text
(``Job.probe_files``, public instructor code, sent with the visible part of the job). So
installing or editing one unit leaves the image, the zygote's bundle and every other unit's
caches as they were. ``install`` puts a finder first on ``sys.meta_path`` that serves exactly
those files at the unit's import path (and empty packages above it that nothing else provides),
before any student code runs.

Standard library only: this runs in the sandbox.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from collections.abc import Mapping, Sequence

ORIGIN = "<unit>"  # where tracebacks say the probes' lines come from


class _Loader(importlib.abc.Loader):
    def __init__(self, source: str | None, filename: str) -> None:
        self.source, self.filename = source, filename

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, target: types.ModuleType) -> None:
        if self.source is not None:
            exec(compile(self.source, self.filename, "exec", dont_inherit=True), target.__dict__)

    def get_source(self, fullname: str) -> str | None:
        return self.source


class UnitFinder(importlib.abc.MetaPathFinder):
    """Serves ``package``'s files (relative path → source) and the empty packages above it."""

    def __init__(self, package: str, files: Mapping[str, str]) -> None:
        self.modules: dict[str, tuple[str | None, str, bool]] = {}
        parts = package.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            if parent not in sys.modules:  # ``grader`` (the harness's own) is there already
                self.modules[parent] = (None, f"{ORIGIN}/{parent.replace('.', '/')}/__init__.py", True)
        for rel, source in files.items():
            pieces = rel.removesuffix(".py").split("/")
            is_package = pieces[-1] == "__init__"
            name = ".".join([package, *(pieces[:-1] if is_package else pieces)])
            self.modules[name] = (source, f"{ORIGIN}/{package.replace('.', '/')}/{rel}", is_package)
        self.modules.setdefault(package, (None, f"{ORIGIN}/{package.replace('.', '/')}/__init__.py", True))

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: types.ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        found = self.modules.get(fullname)
        if found is None:
            return None
        source, filename, is_package = found
        spec = importlib.machinery.ModuleSpec(fullname, _Loader(source, filename), origin=filename,
                                              is_package=is_package)
        return spec


def install(package: str, files: Mapping[str, str]) -> None:
    """Serve ``files`` as the package ``package`` from now on in this process (none: nothing)."""
    if not files:
        return
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, UnitFinder)]
    sys.meta_path.insert(0, UnitFinder(package, files))
