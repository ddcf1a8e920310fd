"""The two kinds of catalog entry for module 11's bug notebooks (grader/modules/embeddings/tests/bugs/): the unit test kit's
Bug and Style (grader.unittesting), kept in this folder; their bases are in ``submissions/``."""

from __future__ import annotations

from pathlib import Path

import grader.unittesting as unittesting
from grader.unittesting import build_notebook

HERE = Path(__file__).parent
OLDER, NEWER = "correct_tinytorch.ipynb", "correct_newer_generation.ipynb"


class Style(unittesting.Style):
    """A correct notebook written unusually (or skipping what the assignment never asks): full marks."""

    folder = HERE


class Bug(unittesting.Bug):
    folder = HERE


__all__ = ["HERE", "NEWER", "OLDER", "Bug", "Style", "build_notebook"]
