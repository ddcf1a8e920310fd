"""The two kinds of catalog entry: a bug notebook and a correct one in an unusual style."""

from __future__ import annotations

import json
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




def build_notebook(entry: Bug | Style, bases: Path) -> str:
    """The entry's notebook as JSON text: its base (in ``bases``) with its edits, each found exactly
    once in the base's code cells; edited cells' outputs cleared."""
    nb = json.loads((bases / entry.base).read_text(encoding="utf-8"))
    for old, new in entry.edits:
        hits = [c for c in nb["cells"] if c["cell_type"] == "code" and old in "".join(c["source"])]
        source = "".join(hits[0]["source"]) if len(hits) == 1 else ""
        if len(hits) != 1 or source.count(old) != 1:
            raise ValueError(f"{entry.name}: {old!r} is not found exactly once in {entry.base}")
        hits[0]["source"] = source.replace(old, new).splitlines(keepends=True)
        hits[0]["outputs"], hits[0]["execution_count"] = [], None
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
