"""Bug and style notebooks from the fairness audit of 76 unseen module-11 notebooks (December): an
older notebook graded as newer for an optional start_pos, gradients through EmbeddingLayer, a 1-D
input reshaped in place, and causes that named the wrong bug. Built like catalog.py's entries: a base
notebook plus exact text edits."""

from __future__ import annotations

from .kinds import OLDER, Bug, Style

_PE_START_POS = (
    ("    def forward(self, x: Tensor) -> Tensor:\n        if len(x.shape) != 3:",
     "    def forward(self, x: Tensor, start_pos: int = 0) -> Tensor:\n        if len(x.shape) != 3:"),
    ("        if seq_len > self.max_seq_len:\n            raise ValueError(\n"
     "                f\"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}\"\n            )\n"
     "        if embed_dim != self.embed_dim:",
     "        if start_pos + seq_len > self.max_seq_len:\n            raise ValueError(\n"
     "                f\"Sequence length {seq_len} from {start_pos} exceeds max_seq_len={self.max_seq_len}\"\n"
     "            )\n        if embed_dim != self.embed_dim:"),
    ("        positions = self.position_embeddings[:seq_len]\n",
     "        positions = self.position_embeddings[start_pos:start_pos + seq_len]  # offset for cached generation\n"),
    ("    def __call__(self, x: Tensor) -> Tensor:\n        return self.forward(x)\n",
     "    def __call__(self, x: Tensor, start_pos: int = 0) -> Tensor:\n        return self.forward(x, start_pos)\n"),
)
_RANGE_CHECK = ("        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n"
                "                f\"Token ids must be in [0, {self.vocab_size}); \"\n"
                "                f\"got min={ids.min()}, max={ids.max()}\"\n            )\n")

AUDIT_STYLES = (
    Style("style_old_pe_start_pos_extension", OLDER, _PE_START_POS,
          "Older notebook (module-05 EmbeddingBackward) whose PositionalEncoding also takes an optional start_pos: "
          "the evidence is mixed, so only what both generations ask is scored and the newer-API checks do not apply"),
    Style("style_old_no_range_check_plus_start_pos", OLDER, ((_RANGE_CHECK, ""), *_PE_START_POS),
          "The same, without the range check the older course never asks for: a 0-point note on emb_index_error, "
          "not the newer generation's lost points", note="emb_index_error"),
)
AUDIT_BUGS: tuple[Bug, ...] = ()
