"""Import everything a job may need before any job exists: numpy, the harness, every unit's
probes and every course runtime in the bundle. A sandbox then never reads the bundle again, and
each job costs a fork, not imports."""

from __future__ import annotations

import importlib
import os
import pkgutil


def _import_tree(package: str) -> None:
    try:
        root = importlib.import_module(package)
        for info in pkgutil.walk_packages(getattr(root, "__path__", []), package + "."):
            importlib.import_module(info.name)
    except Exception:  # a broken optional module must not stop the sandbox; the job reports it
        pass


def preload() -> None:
    import numpy
    import numpy.random  # noqa: F401

    from . import isolate, probes, run, seccomp, selftest, supervisor  # noqa: F401

    _import_tree(probes.__name__)
    _import_tree("grader.modules")  # every unit's probes (the bundle holds nothing else there)
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for entry in sorted(os.listdir(bundle)):  # the course runtimes: every other top-level package
        if entry != "grader" and os.path.isfile(os.path.join(bundle, entry, "__init__.py")):
            _import_tree(entry)
