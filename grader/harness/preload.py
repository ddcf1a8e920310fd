"""Import everything a job may need before any job exists: numpy, the harness and every course
runtime in the bundle. A sandbox then never reads the bundle again, and each job costs a fork and
its unit's probes (which come with the job, grader/harness/unitfiles.py), not imports."""

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
    import faulthandler  # noqa: F401  (the check runners' stack on request)
    import random  # noqa: F401

    import numpy
    import numpy.random  # noqa: F401

    from . import isolate, layercheck, probes, run, runners, seccomp, supervisor, unitfiles  # noqa: F401

    try:
        seccomp.library()  # loaded once here rather than by every job
    except OSError:
        pass  # the job's own setup reports it
    _import_tree(probes.__name__)
    _import_tree("grader.modules")  # a unit's own bundle (its reference worker) holds its probes there
    bundle = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for entry in sorted(os.listdir(bundle)):  # the course runtimes: every other top-level package
        if entry != "grader" and os.path.isfile(os.path.join(bundle, entry, "__init__.py")):
            _import_tree(entry)
