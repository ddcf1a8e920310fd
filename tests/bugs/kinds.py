"""The two kinds of catalog entry: a bug notebook and a correct one in an unusual style."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
OLDER, NEWER = "correct_tinytorch.ipynb", "correct_newer_generation.ipynb"


@dataclass(frozen=True)
class Style:
    """A correct notebook written unusually (or skipping what the assignment never asks): full marks."""

    name: str
    base: str
    edits: tuple[tuple[str, str], ...]
    about: str
    note: str = ""  # a check whose passing message says what beyond the assignment the style skips

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.ipynb"


@dataclass(frozen=True)
class Bug:
    name: str
    base: str
    edits: tuple[tuple[str, str], ...]
    fails: tuple[str, ...]
    cause: str
    about: str

    @property
    def path(self) -> Path:
        return HERE / f"{self.name}.ipynb"


