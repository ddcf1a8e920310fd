"""Build hook: what an editable install of the grader puts into site-packages.

A regular wheel carries the ``grader`` package, the course runtime (force-include in
pyproject.toml) and the ``tito`` startup hook. An editable install carries two ``.pth`` files
and no module at all:

- ``_tinytorch_grader_editable.pth``: a finder that maps the name ``grader`` (and only it) to the
  source tree, so ``tests``, ``benchmarks`` or ``reference`` of the checkout never become importable.
  It comes last on ``sys.meta_path``: a ``grader`` on ``sys.path`` wins, as the sandbox bundle's
  must in the sandbox and the reference worker.
  The runtime is read from the source tree (grader/paths.py).
- the ``tito`` startup hook, as in the regular wheel.

With no module among the editable wheel's files, pytest marks nothing of ours for assert rewriting
(it marks the top-level modules and packages it finds among a pytest plugin's distribution files,
stripping leading folders until it finds one: a copied runtime made it rewrite ``tinytorch``, and
the ``editables`` helper module it would find is imported before pytest starts, which warns).
``dev-mode-dirs = ["packaging"]`` in pyproject.toml selects hatchling's plain ``.pth`` editable
mode; that folder holds no module, so the path it adds exposes nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

STARTUP_HOOK = ("packaging/tinytorch_grader_tito.pth", "tinytorch_grader_tito.pth")
FINDER = (
    "import sys; any(type(f).__name__ == 'TinytorchGraderEditable' for f in sys.meta_path)"
    " or sys.meta_path.append(type('TinytorchGraderEditable', (), {{'find_spec': staticmethod("
    "lambda name, path=None, target=None: __import__('importlib.machinery').machinery.PathFinder.find_spec(name, [{src!r}])"
    " if name == 'grader' else None)}})())\n"  # once, although site reads the .pth from lib and lib64
)


class EditableBuildHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version != "editable":
            return
        finder = Path(tempfile.mkdtemp(prefix="grader-editable-")) / "_tinytorch_grader_editable.pth"
        finder.write_text(FINDER.format(src=str(Path(self.root).resolve())), encoding="utf-8")
        build_data["force_include_editable"] = {str(finder): finder.name, STARTUP_HOOK[0]: STARTUP_HOOK[1]}
