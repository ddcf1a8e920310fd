"""A grader installed without its dependencies (``pip install --no-deps``) says which one it needs
and how to install it, at its entry points (``grader``, ``tito-grade``, ``tito test --module``),
instead of a traceback ending in ``ModuleNotFoundError``. Standard library only."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from functools import wraps
from typing import TypeVar

EXIT_USAGE = 2
# Import names that are not their distribution's name.
DISTRIBUTIONS = {"yaml": "PyYAML", "jinja2": "Jinja2", "sqlalchemy": "SQLAlchemy", "jwt": "PyJWT",
                 "multipart": "python-multipart", "prometheus_client": "prometheus-client", "psycopg": "psycopg"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared() -> dict[str, str]:
    """This distribution's requirements (extras too), by normalised name: name -> requirement."""
    from importlib import metadata

    from .edition import STUDENT

    try:
        requires = metadata.requires("tinytorch-grader-student" if STUDENT else "tinytorch-grader") or []
    except metadata.PackageNotFoundError:
        requires = []
    declared = {}
    for line in requires:
        spec = line.split(";")[0].strip()
        if m := re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", spec):
            declared[_normal(m.group(0))] = re.sub(r"\[.*?\]", "", spec).replace(" ", "")
    return declared


def missing(error: ModuleNotFoundError) -> str | None:
    """The one-line fix when ``error`` is a dependency of the grader that is not installed; None
    when it is something else (the grader's own bug: left to be reported)."""
    top = (error.name or "").partition(".")[0]
    if not top or top == "grader":
        return None
    project = DISTRIBUTIONS.get(top, top)
    declared = _declared()
    requirement = declared.get(_normal(project))
    if requirement is None and declared:
        return None
    requirement = requirement or project
    quoted = f"'{requirement}'" if any(c in requirement for c in "<>=!~") else requirement
    return (f"error: the grader needs {project}, which is not installed: pip install {quoted} (it was installed "
            "without its dependencies, e.g. with pip install --no-deps)")


F = TypeVar("F", bound=Callable[..., int])


def dependencies_checked(main: F) -> F:
    """An entry point that answers a missing dependency with ``missing``'s line and exit 2."""

    @wraps(main)
    def run(*args: object, **kwargs: object) -> int:
        try:
            return main(*args, **kwargs)
        except ModuleNotFoundError as e:
            fix = missing(e)
            if fix is None:
                raise
            print(fix, file=sys.stderr)
            return EXIT_USAGE

    return run  # type: ignore[return-value]
