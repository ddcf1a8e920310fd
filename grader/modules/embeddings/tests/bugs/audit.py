"""Bug and style notebooks from the fairness audit of 76 unseen module-11 notebooks (December): an
older notebook graded as newer for an optional start_pos, gradients through EmbeddingLayer, a 1-D
input reshaped in place, and causes that named the wrong bug. Built like catalog.py's entries: a base
notebook plus exact text edits."""

from __future__ import annotations

from .kinds import NEWER, OLDER, Bug, Style

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

_SCALE = "            h = h * math.sqrt(self.embed_dim)\n"

AUDIT_STYLES = (
    Style("style_old_pe_start_pos_extension", OLDER, _PE_START_POS,
          "Older notebook (module-05 EmbeddingBackward) whose PositionalEncoding also takes an optional start_pos: "
          "the evidence is mixed, so only what both generations ask is scored and the newer-API checks do not apply"),
    Style("style_old_no_range_check_plus_start_pos", OLDER, ((_RANGE_CHECK, ""), *_PE_START_POS),
          "The same, without the range check the older course never asks for: a 0-point note on emb_index_error, "
          "not the newer generation's lost points", note="emb_index_error"),
    Style("style_old_layer_scale_data_as_about_md", OLDER,
          ((_SCALE, "            h.data = h.data * math.sqrt(self.embed_dim)  # as ABOUT.md, on the data\n"),),
          "Older notebook scaling h.data in place as the older ABOUT.md scales .data: the token table's gradient is not "
          "scaled, which the older course never asks (a 0-point note)", note="layer_scale"),
)
AUDIT_BUGS: tuple[Bug, ...] = (
    Bug("bug_old_layer_output_detached", OLDER,
        (("            h = h[0]\n        return h\n",
          "            h = h[0]\n        return Tensor(h.data)  # a clean output tensor\n"),),
        ("layer_scale",), "cut off from the autograd graph",
        "EmbeddingLayer returns Tensor(h.data): the values are right, but no gradient reaches either table."),
    Bug("bug_old_layer_1d_mutates_tokens", OLDER,
        (("tokens = Tensor(tokens.data[np.newaxis, :])",
          "tokens.data = tokens.data[np.newaxis, :]  # add the batch axis in place"),),
        ("layer_modes",), "changes the caller's tokens in place",
        "For 1-D tokens the layer writes the batch axis into the caller's Tensor (tokens.data = ...), so a second "
        "call on the same tokens returns (1, seq, embed_dim)."),
    Bug("bug_old_np_take_no_axis", OLDER,
        (("rows = self.weight.data[ids.astype(int)]", "rows = np.take(self.weight.data, ids.astype(int))"),),
        ("emb_shape", "emb_lookup", "emb_large_ids", "grad_accumulate", "grad_sparse", "grad_batch_visible", "grad_batch",
         "layer_modes", "layer_defaults", "layer_sin_values_visible", "layer_sin_values", "layer_scale",
         "layer_sin_too_long"),
        "np.take(table, ids) without axis=0 reads the flattened table",
        "The lookup is np.take(W, ids) without axis=0, which reads the flattened table: one number per id, not a row."),
    Bug("bug_newer_forward_weight_copy", NEWER,
        (("return EmbeddingFunction.apply(self.weight, indices=ids.astype(np.int64))",
          "return EmbeddingFunction.apply(Tensor(self.weight.data, requires_grad=True), indices=ids.astype(np.int64))"),),
        ("grad_accumulate", "emb_large_ids", "grad_sparse", "grad_batch_visible", "grad_batch"),
        "forward handed a copy of the weight",
        "Newer generation: forward hands EmbeddingFunction.apply a copy, Tensor(self.weight.data, requires_grad=True), "
        "so the gradient goes to the copy and self.weight never gets one."),
    Bug("bug_newer_backward_sets_grad_too", NEWER,
        (("        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n        return (grad_weight,)\n",
          "        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n"
          "        weight.grad = grad_weight  # make sure the table gets it\n        return (grad_weight,)\n"),),
        ("grad_accumulate", "emb_large_ids", "grad_sparse", "grad_batch_visible", "grad_batch"),
        "it was added 2 times",
        "Newer generation: backward stores the gradient in weight.grad and also returns it, so the engine adds it a "
        "second time (2x)."),
    Bug("bug_old_scale_weights_at_init", OLDER,
        (("        self.token_embedding = Embedding(vocab_size, embed_dim)\n        if pos_encoding == 'learned':",
          "        self.token_embedding = Embedding(vocab_size, embed_dim)\n"
          "        if scale_embeddings:  # scale once, here, instead of on every call\n"
          "            self.token_embedding.weight.data *= math.sqrt(embed_dim)\n        if pos_encoding == 'learned':"),
         ("        if self.scale_embeddings:\n            h = h * math.sqrt(self.embed_dim)\n", "")),
        ("layer_scale",), "scales the token table once, in __init__",
        "scale_embeddings multiplies the token table once in __init__ instead of the token embeddings in forward."),
    Bug("bug_old_scale_only_sinusoidal", OLDER,
        (("        if self.scale_embeddings:\n            h = h * math.sqrt(self.embed_dim)\n", ""),
         ("            h = h + self.pos_encoding[:seq_len]\n",
          "            if self.scale_embeddings:\n                h = h * math.sqrt(self.embed_dim)\n"
          "            h = h + self.pos_encoding[:seq_len]\n")),
        ("layer_scale",), "only in the sinusoidal mode",
        "The scaling sits inside the sinusoidal branch, so the None and learned modes are never scaled."),
    Bug("bug_newer_backward_ids_transposed", NEWER,
        (("        flat_ids = np.asarray(self.indices, dtype=np.int64).reshape(-1)\n        upstream",
          "        flat_ids = np.asarray(self.indices, dtype=np.int64).T.reshape(-1)\n        upstream"),),
        ("grad_batch_visible", "grad_batch"), "flattened in another order than the upstream gradient",
        "Newer generation: backward flattens ids.T (column order) while the upstream gradient is flattened in row order."),
    Bug("bug_old_table_extra_row", OLDER,
        (("size=(vocab_size, embed_dim))", "size=(vocab_size + 1, embed_dim))  # one spare row for unknown tokens"),),
        ("emb_params", "emb_lookup", "emb_large_ids", "emb_xavier", "grad_accumulate", "grad_sparse", "grad_batch_visible",
         "grad_batch", "grad_keeps_weight", "layer_defaults", "layer_sin_values_visible", "layer_sin_values",
         "layer_scale"),
        "one row more (a spare row for unknown or padding tokens?) than vocab_size",
        "The embedding table has vocab_size + 1 rows (a spare row for unknown tokens)."),
    Bug("bug_old_layer_sin_args_swapped", OLDER,
        (("self.pos_encoding = create_sinusoidal_embeddings(max_seq_len, embed_dim)",
          "self.pos_encoding = create_sinusoidal_embeddings(embed_dim, max_seq_len)"),),
        ("layer_modes", "layer_defaults", "layer_sin_values_visible", "layer_sin_values", "layer_scale",
         "layer_sin_too_long"),
        "calls it with the arguments swapped",
        "EmbeddingLayer calls create_sinusoidal_embeddings(embed_dim, max_seq_len): the arguments are swapped."),
    Bug("bug_old_pe_as_about_md", OLDER,
        (("        # (seq_len, embed_dim) broadcasts against (batch, seq_len, embed_dim)\n"
          "        positions = self.position_embeddings[:seq_len]\n        return x + positions\n",
          "        pos_embeddings = self.position_embeddings.data[:seq_len]\n"
          "        pos_embeddings = pos_embeddings[np.newaxis, :, :]        # (1, seq_len, embed_dim)\n"
          "        return x + Tensor(pos_embeddings, requires_grad=True)\n"),),
        ("pe_grad",), "wrapping the table's data in a new Tensor cuts the gradient",
        "PositionalEncoding adds Tensor(P.data[:seq_len][np.newaxis], requires_grad=True), as the older ABOUT.md "
        "sketches it: x learns, but the position table never gets a gradient."),
    Bug("bug_newer_layer_scale_data_inplace", NEWER,
        ((_SCALE, "            h.data = h.data * math.sqrt(self.embed_dim)  # in place, no new Tensor\n"),),
        ("layer_scale",), "the token table's gradient is not scaled",
        "Newer generation: the layer scales h.data in place: the output is right, but the token table's gradient is not scaled."),
)
