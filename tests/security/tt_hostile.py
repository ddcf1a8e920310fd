"""Build hostile notebooks: a compact module-11 implementation with hook points + an attack snippet.

The implementation is our own (correct, or with the ``backward overwrites`` bug). Attack code goes
into a hooks cell placed right after the imports cell. The targets call the hooks, so the grader's
extractor keeps them (it drops top-level calls, loops and prints, but keeps whatever a target needs):

- ``_record_ctx()``                         runs first at import time: ``_CTX`` = harness pid, host pid, cwd
- ``_on_import()``                          runs while ``Embedding``'s class body executes (import time)
- ``_on_forward(emb, indices, out)``        Embedding.forward returns what it returns
- ``_on_backward(node, grad_output, grad)`` the lookup's backward returns ``(what it returns,)``
- ``_on_table(table)``                      create_sinusoidal_embeddings returns what it returns

A snippet redefines any of them (later definitions win) and may define helpers of its own.
Placeholders ``{MARK}`` (a unique marker path prefix under /tmp), ``{TOKEN}``, ``{PORT}`` and ``{VICTIM}``
are filled in per test by :func:`fill`.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

IMPORTS = """\
#| export
import numpy as np
import math
from tinytorch.core.tensor import Tensor
from tinytorch.core.autograd import Function
"""

DEFAULT_HOOKS = """\
_CTX = {}


def _record_ctx():
    import os
    _CTX.setdefault("harness", os.getpid())
    _CTX.setdefault("host", os.getppid())
    _CTX.setdefault("cwd", os.getcwd())
    return dict(_CTX)


def _on_import():
    return None


def _on_forward(emb, indices, out):
    return out


def _on_backward(node, grad_output, grad):
    return grad


def _on_table(table):
    return table
"""

_BACKWARD = """\
#| export
class LookupBackward(Function):
    def __init__(self, weight, indices):
        super().__init__(weight)
        self.indices = indices

    def apply(self, grad_output):
        weight = self.saved_tensors[0]
        ids = np.asarray(self.indices.data).astype(int).reshape(-1)
        rows = np.asarray(grad_output, dtype=np.float64).reshape(ids.size, -1)
        grad = np.zeros(weight.data.shape)
        {ACCUMULATE}
        return (_on_backward(self, grad_output, grad),)
"""
ACCUMULATE = {
    "correct": "np.add.at(grad, ids, rows)",
    "buggy": "grad[ids] = rows  # repeated ids overwrite each other",
}

EMBEDDING = """\
#| export
class Embedding:
    _ctx_hook = _record_ctx()
    _import_hook = _on_import()

    def __init__(self, vocab_size, embed_dim):
        self.vocab_size, self.embed_dim = vocab_size, embed_dim
        bound = math.sqrt(6.0 / (vocab_size + embed_dim))
        self.weight = Tensor(np.random.uniform(-bound, bound, (vocab_size, embed_dim)), requires_grad=True)

    def forward(self, indices):
        ids = indices.data
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(f"ids must be in [0, {self.vocab_size})")
        out = Tensor(self.weight.data[ids.astype(int)], requires_grad=True)
        out._grad_fn = LookupBackward(self.weight, indices)
        return _on_forward(self, indices, out)

    def __call__(self, indices):
        return self.forward(indices)

    def parameters(self):
        return [self.weight]
"""

POSITIONAL = """\
#| export
class PositionalEncoding:
    def __init__(self, max_seq_len, embed_dim):
        self.max_seq_len, self.embed_dim = max_seq_len, embed_dim
        bound = math.sqrt(2.0 / embed_dim)
        self.position_embeddings = Tensor(np.random.uniform(-bound, bound, (max_seq_len, embed_dim)),
                                          requires_grad=True)

    def forward(self, x):
        if len(x.shape) != 3:
            raise ValueError("x must be (batch, seq, dim)")
        if x.shape[1] > self.max_seq_len:
            raise ValueError("sequence longer than max_seq_len")
        if x.shape[2] != self.embed_dim:
            raise ValueError("wrong embed_dim")
        return x + self.position_embeddings[:x.shape[1]]

    def __call__(self, x):
        return self.forward(x)

    def parameters(self):
        return [self.position_embeddings]
"""

SINUSOID = """\
#| export
def create_sinusoidal_embeddings(max_seq_len, embed_dim):
    pos = np.arange(max_seq_len, dtype=np.float64)[:, None]
    inv = np.exp(-math.log(10000.0) * np.arange(0, embed_dim, 2, dtype=np.float64) / embed_dim)
    angles = pos * inv
    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])
    return _on_table(Tensor(table))
"""

LAYER = """\
#| export
class EmbeddingLayer:
    def __init__(self, vocab_size, embed_dim, max_seq_len=512, pos_encoding='learned',
                 scale_embeddings=False):
        if pos_encoding not in ('learned', 'sinusoidal', None):
            raise ValueError(f"unknown pos_encoding {pos_encoding!r}")
        self.vocab_size, self.embed_dim, self.max_seq_len = vocab_size, embed_dim, max_seq_len
        self.mode, self.scale = pos_encoding, scale_embeddings
        self.token_embedding = Embedding(vocab_size, embed_dim)
        if pos_encoding == 'learned':
            self.pos_encoding = PositionalEncoding(max_seq_len, embed_dim)
        elif pos_encoding == 'sinusoidal':
            self.pos_encoding = create_sinusoidal_embeddings(max_seq_len, embed_dim)
        else:
            self.pos_encoding = None

    def forward(self, tokens):
        single = len(tokens.shape) == 1
        if single:
            tokens = Tensor(tokens.data[None, :])
        h = self.token_embedding(tokens)
        if self.scale:
            h = h * math.sqrt(self.embed_dim)
        if self.mode == 'learned':
            h = self.pos_encoding(h)
        elif self.mode == 'sinusoidal':
            if h.shape[1] > self.max_seq_len:
                raise ValueError("sequence longer than max_seq_len")
            h = h + self.pos_encoding[:h.shape[1]]
        return h[0] if single else h

    def __call__(self, tokens):
        return self.forward(tokens)

    def parameters(self):
        params = list(self.token_embedding.parameters())
        if self.mode == 'learned':
            params += self.pos_encoding.parameters()
        return params
"""


def code_cell(source: str, outputs: list[dict[str, Any]] | None = None, **metadata: Any) -> dict[str, Any]:
    return {"cell_type": "code", "execution_count": None, "id": uuid.uuid4().hex[:8], "metadata": metadata,
            "outputs": outputs or [], "source": source}


def markdown_cell(source: str) -> dict[str, Any]:
    return {"cell_type": "markdown", "id": uuid.uuid4().hex[:8], "metadata": {}, "source": source}


def notebook(cells: list[dict[str, Any]], **metadata: Any) -> dict[str, Any]:
    meta = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}}
    meta.update(metadata)
    return {"cells": cells, "metadata": meta, "nbformat": 4, "nbformat_minor": 5}


def fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace("{" + key + "}", value)
    return text


def implementation_cells(base: str = "correct", attack: str = "") -> list[dict[str, Any]]:
    """The module as notebook cells: markdown, imports, hooks (+ attack), the four targets."""
    hooks = DEFAULT_HOOKS + ("\n\n" + attack if attack else "")
    return [
        markdown_cell("# Module 11: Embeddings\nMy solution."),
        code_cell("#| default_exp core.embeddings"),
        code_cell(IMPORTS),
        code_cell(hooks),
        code_cell(_BACKWARD.replace("{ACCUMULATE}", ACCUMULATE[base])),
        code_cell(EMBEDDING),
        code_cell(POSITIONAL),
        code_cell(SINUSOID),
        code_cell(LAYER),
    ]


def build(base: str = "correct", attack: str = "", extra_cells: list[dict[str, Any]] | None = None,
          **metadata: Any) -> dict[str, Any]:
    return notebook(implementation_cells(base, attack) + list(extra_cells or []), **metadata)


def write(path: Path, nb: dict[str, Any] | str | bytes) -> Path:
    if isinstance(nb, bytes):
        path.write_bytes(nb)
    else:
        path.write_text(nb if isinstance(nb, str) else json.dumps(nb, indent=1), encoding="utf-8")
    return path
