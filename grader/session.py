"""The one door: every front end grades through a ``Session``.

``grader grade``, ``tito test --module``, the pytest plugin, ``grader batch``, the Gradescope mode,
the daemon and the grading service each open a session, ask it for graders, and close it. The
session owns what is expensive and shared: the sandboxes (one per backend, started early so that
their interpreters boot while the caller imports), the reference oracles (one per course module)
and their lifecycle. A ``Grader`` made by a session uses them and never closes them; the session
closes everything once, at the end. The daemon simply keeps one session open across requests.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .sandbox import BACKENDS, Sandbox, Startable, make_sandbox

if TYPE_CHECKING:
    from .models import GradeReport
    from .pipeline import Grader
    from .reference import Oracle
    from .rubric import Rubric


class Session:
    """Sandboxes and reference oracles for any number of graders; thread-safe; close once."""

    def __init__(self, *, official: bool = False, hide: Sequence[Path] = (), runs: int | None = None,
                 cached_reference: bool = True) -> None:
        self.official = official
        # False: every expected output is computed afresh, from nothing an earlier run cached
        # (the shipped outputs' refresh: the same files whatever ran on this machine before)
        self.cached_reference = cached_reference
        self.hide = tuple(hide)  # extra staff paths every sandbox of this session keeps away from students
        self.runs = runs  # how many sandbox runs this session will make, when known (None: open-ended)
        self._sandboxes: dict[str, Sandbox] = {}
        self._oracles: dict[str, Oracle] = {}
        self._lock = threading.Lock()
        self._closed = False

    def sandbox(self, backend: str = "local") -> Sandbox:
        """The session's sandbox for ``backend``, made (and started) on first use."""
        with self._lock:
            if self._closed:
                raise RuntimeError("this grading session is closed")
            if backend not in self._sandboxes:
                if backend not in BACKENDS:
                    from .errors import SandboxUnavailable

                    raise SandboxUnavailable(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
                made = make_sandbox(backend, self.official, keep_ready=self.runs is None or self.runs > 1)
                if self.hide:
                    from .sandbox import HidingSandbox

                    made = HidingSandbox(made, self.hide)
                self._sandboxes[backend] = made
            return self._sandboxes[backend]

    def oracle(self, module: str) -> Oracle:
        """The expected outputs of a course module (its trusted reference worker, or in the student
        package the shipped expected outputs), made on first use."""
        from .reference import oracle_for

        with self._lock:
            if self._closed:
                raise RuntimeError("this grading session is closed")
            if module not in self._oracles:
                self._oracles[module] = oracle_for(module, cached=self.cached_reference)
                self._fork_reference_from_zygote(self._oracles[module])
            return self._oracles[module]

    def _fork_reference_from_zygote(self, oracle: Oracle) -> None:
        """A reference worker of a session with a local sandbox is forked by its zygote (numpy and
        the runtime imported already) rather than started as a new interpreter."""
        from .reference import ReferenceOracle
        from .sandbox import HidingSandbox

        local = self._sandboxes.get("local")
        local = local.inner if isinstance(local, HidingSandbox) else local
        if local is not None and isinstance(oracle, ReferenceOracle):
            from .sandbox.local import LocalSandbox

            if isinstance(local, LocalSandbox):
                oracle.spawner = local.fork_reference

    def warm(self, backend: str = "local", rubric: str | Path | None = None, module: str | None = None,
             reference: bool = True) -> None:
        """Start the sandbox now and, in the background, the rubric's reference worker: their
        interpreters boot while the caller does its own imports. Errors surface when grading.
        Without ``reference`` the worker starts only when an expected output is not cached."""
        from .errors import GraderError

        try:
            sandbox = self.sandbox(backend)
            if isinstance(sandbox, Startable):
                sandbox.start()
        except (GraderError, RuntimeError):
            pass  # an unavailable backend (grading itself says so, with the fix), or a session closed meanwhile

        def start_oracle() -> None:
            try:
                from .rubric import load_rubric

                self.oracle(load_rubric(rubric, module=module).module).start()
            except Exception:  # the grader made for this rubric reports the problem properly
                pass

        if reference:
            threading.Thread(target=start_oracle, daemon=True).start()

    def warm_in_background(self, backend: str = "local", rubric: str | Path | None = None) -> None:
        """``warm`` on a thread of its own (the local backend only: a Docker sandbox has nothing to
        boot), so that the caller goes on importing and reading meanwhile."""
        if backend == "local":
            threading.Thread(target=self.warm, args=(backend, rubric), daemon=True).start()

    def grader(self, rubric: Rubric | str | Path | None = None, *, module: str | None = None, backend: str = "local",
               public_only: bool = False, seed: int | None = None, parallel: int | None = None,
               seed_secret: bytes | None = None) -> Grader:
        """A grader for one rubric (default: the rubric of ``module``, or of the only installed
        course module) on this session's sandbox and oracle; closing it closes nothing.
        ``parallel``: checks of one submission run at once (default: up to 2). ``seed_secret``:
        the course's key of the hidden checks' inputs (grader.secret); an official session refuses
        to grade without one of the course's own (NoCourseSecret)."""
        from . import secret
        from .pipeline import Grader
        from .rubric import load_rubric

        if self.official:
            seed_secret = secret.for_official(seed_secret)
        loaded = rubric if not isinstance(rubric, str | Path | None) else load_rubric(rubric, module=module)
        return Grader(loaded, self.sandbox(backend), self.oracle(loaded.module), public_only=public_only, seed=seed,
                      parallel=parallel, seed_secret=seed_secret)

    def grade(self, path: str | Path, rubric: Rubric | str | Path | None = None, **options: object) -> GradeReport:
        """Grade one file: ``Session().grade("nb.ipynb")``; without a rubric, the course module is
        chosen from the file and ``module`` (grader.modules.choose)."""
        if rubric is None:
            from .modules.choose import choose_module

            options["module"] = choose_module(path, options.get("module")).name  # type: ignore[arg-type]
        return self.grader(rubric, **options).grade(path)  # type: ignore[arg-type]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sandboxes, oracles = list(self._sandboxes.values()), list(self._oracles.values())
            self._sandboxes.clear()
            self._oracles.clear()
        for sandbox in sandboxes:
            if isinstance(sandbox, Startable):
                sandbox.close()
        for oracle in oracles:
            oracle.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
