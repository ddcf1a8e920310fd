"""Bug notebooks for the families of likely causes, and correct notebooks in unusual styles.

Each bug is one realistic student mistake per family a cause must name (a formula mistake of the
sinusoid, a crash inside numpy, a table left out of parameters(), ...); each style is a correct
implementation written unusually, or one that skips what the assignment never asks for (a range
check in the older generation, numpy refusing instead of the student's own check). Every style
scores full marks. Built like catalog.py's bugs: a base notebook plus exact text edits.
"""

from __future__ import annotations

from .kinds import NEWER, OLDER, Bug, Style

FAMILY_BUGS = (
    Bug("bug_newer_start_pos_negative", NEWER,
        (("if not isinstance(start_pos, (int, np.integer)) or start_pos < 0:",
          "if not isinstance(start_pos, (int, np.integer)):"),),
        ("pe_start_pos",), "start_pos=-3 was accepted",
        "Newer generation: PositionalEncoding checks that start_pos is an integer but not that it is >= 0, so start_pos=-3 adds rows from the table's end (-1 fails only because its window is empty)."),
    Bug("bug_newer_pe_no_dim_check", NEWER,
        (("        batch_size, seq_len, embed_dim = x.shape\n        if embed_dim != self.embed_dim:\n"
          "            raise ValueError(f\"embed_dim mismatch: table has {self.embed_dim}, input has {embed_dim}\")\n",
          "        batch_size, seq_len, embed_dim = x.shape\n"),
         ("        return x + window.reshape(1, seq_len, embed_dim)\n", "        return x + window  # broadcasts over the batch\n")),
        ("pe_bad_shape",), "last dimension 1 was accepted",
        "Newer generation: PositionalEncoding drops the given embed_dim check and adds the window by broadcasting, so x with a last dimension of 1 is silently widened."),
    Bug('bug_old_pe_unpack_seq_batch', OLDER,
        (('        batch_size, seq_len, embed_dim = x.shape\n', '        seq_len, batch_size = x.shape[:2]\n        embed_dim = x.shape[2]\n'), ),
        ('pe_broadcast', 'pe_too_long', 'pe_grad', 'layer_modes', 'layer_defaults', 'layer_scale'), 'order',
        'PositionalEncoding unpacks x.shape[:2] as (seq_len, batch), so it slices batch-many rows and compares the batch size with max_seq_len.'),

    Bug('bug_new_pe_unpack_seq_batch', NEWER,
        (('        batch_size, seq_len, embed_dim = x.shape\n', '        seq_len, batch_size = x.shape[:2]\n        embed_dim = x.shape[-1]\n'), ),
        ('pe_broadcast', 'pe_too_long', 'pe_grad', 'pe_start_pos', 'layer_modes', 'layer_defaults', 'layer_scale', 'layer_start_pos'), 'order',
        'Newer PositionalEncoding unpacks x.shape[:2] as (seq_len, batch), so the window has batch-many rows.'),

    Bug('bug_old_pe_reshape_batch', OLDER,
        (('        positions = self.position_embeddings[:seq_len]\n', '        positions = self.position_embeddings[:seq_len].reshape(batch_size, seq_len, embed_dim)\n'), ),
        ('pe_broadcast', 'pe_too_long', 'pe_grad', 'layer_modes', 'layer_defaults', 'layer_scale'), 'reshape',
        'PositionalEncoding reshapes the (seq_len, D) rows to (batch, seq_len, D), which fails for batch > 1.'),

    Bug('bug_new_pe_reshape_batch', NEWER,
        (('        return x + window.reshape(1, seq_len, embed_dim)\n', '        return x + window.reshape(batch_size, seq_len, embed_dim)\n'), ),
        ('pe_broadcast', 'pe_too_long', 'pe_grad', 'pe_start_pos', 'layer_modes', 'layer_defaults', 'layer_scale', 'layer_start_pos'), 'reshape',
        'Newer PositionalEncoding reshapes the window to (batch, seq_len, D) instead of (1, seq_len, D); it fails for batch > 1.'),

    Bug('bug_old_pe_init_zeros', OLDER,
        (('            np.random.uniform(-bound, bound, size=(max_seq_len, embed_dim)),\n', '            np.zeros((max_seq_len, embed_dim)),  # positions are learned from scratch\n'), ),
        ('pe_init',), 'zero',
        'The learned position table is initialised to all zeros instead of uniform ±sqrt(2/D).'),

    Bug('bug_new_pe_init_zeros', NEWER,
        (('        self.position_embeddings = Tensor(rng.uniform(-limit, limit, (max_seq_len, embed_dim)),\n', '        self.position_embeddings = Tensor(np.zeros((max_seq_len, embed_dim)),\n'), ),
        ('pe_init',), 'zero',
        "Newer PositionalEncoding's table is all zeros instead of uniform ±sqrt(2/D)."),

    Bug('bug_old_layer_params_no_positions', OLDER,
        (("        params = list(self.token_embedding.parameters())\n        if self.pos_encoding_type == 'learned':\n            params += self.pos_encoding.parameters()\n        return params\n", '        return [self.token_embedding.weight]\n'), ),
        ('layer_modes', 'layer_defaults'), 'position table',
        'EmbeddingLayer.parameters() returns only the token table, leaving out the learned position table.'),

    Bug('bug_new_layer_params_no_positions', NEWER,
        (("        params = self.token_embedding.parameters()\n        if self.pos_encoding_type == 'learned':\n            params = params + self.pos_encoding.parameters()\n        return params\n", '        return self.token_embedding.parameters()   # the trainable lookup table\n'), ),
        ('layer_modes', 'layer_defaults'), 'position table',
        'Newer EmbeddingLayer.parameters() returns only the token table, leaving out the learned position table.'),

    Bug('bug_new_take_clip_no_check', NEWER,
        (('        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n                f"Token ids must lie in [0, {self.vocab_size}); "\n                f"found range [{int(ids.min())}, {int(ids.max())}]"\n            )\n', ''), ('        return weight[self.indices]\n', "        return np.take(weight, self.indices, axis=0, mode='clip')  # never out of bounds\n"), ),
        ('emb_index_error',), 'clip',
        "Newer: the range check is removed and the lookup uses np.take(..., mode='clip'), so bad ids are clamped to the first/last row instead of raising ValueError."),

    Bug('bug_new_take_wrap_no_check', NEWER,
        (('        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n                f"Token ids must lie in [0, {self.vocab_size}); "\n                f"found range [{int(ids.min())}, {int(ids.max())}]"\n            )\n', ''), ('        return weight[self.indices]\n', "        return np.take(weight, self.indices, axis=0, mode='wrap')\n"), ),
        ('emb_index_error',), "mode='wrap'",
        "Newer: no range check, and np.take(..., mode='wrap') maps id V to row 0 and -1 to the last row instead of raising ValueError."),

    Bug('bug_old_pe_no_requires_grad', OLDER,
        (('            np.random.uniform(-bound, bound, size=(max_seq_len, embed_dim)),\n            requires_grad=True,\n', '            np.random.uniform(-bound, bound, size=(max_seq_len, embed_dim)),\n'), ),
        ('pe_grad',), 'requires_grad',
        'The learned position table is created without requires_grad=True, so it never gets a gradient.'),

    Bug('bug_new_pe_no_requires_grad', NEWER,
        (('        self.position_embeddings = Tensor(rng.uniform(-limit, limit, (max_seq_len, embed_dim)),\n                                          requires_grad=True)\n', '        self.position_embeddings = Tensor(rng.uniform(-limit, limit, (max_seq_len, embed_dim)))\n'), ),
        ('pe_grad', 'pe_start_pos'), 'requires_grad',
        'Newer: the position table is created without requires_grad=True, so it never gets a gradient.'),

    Bug('bug_new_sin_returns_ndarray', NEWER,
        (('    return Tensor(pe)\n', '    return pe\n'), ('            table = self.pos_encoding[start_pos:start_pos + seq_len]\n            h = h + table.reshape(1, seq_len, embed_dim)\n', '            table = self.pos_encoding.data[start_pos:start_pos + seq_len]   # constant rows\n            h = h + Tensor(table.reshape(1, seq_len, embed_dim))\n'), ),
        ('layer_modes', 'sin_fixed', 'layer_defaults', 'layer_sin_values_visible', 'layer_sin_values', 'layer_sin_too_long', 'layer_start_pos', 'layer_scale'), 'ndarray',
        "create_sinusoidal_embeddings returns the numpy array, not a Tensor, so the layer's pos_encoding.data[...] slices a memoryview and fails."),

    Bug('bug_old_sin_returns_ndarray_newaxis', OLDER,
        (('    return Tensor(table)\n', '    return table\n'), ('            h = h + self.pos_encoding[:seq_len]\n', '            # constant rows, (1, T, D), no gradient needed\n            h = h + Tensor(self.pos_encoding.data[np.newaxis, :seq_len], requires_grad=False)\n'), ),
        ('layer_modes', 'sin_fixed', 'layer_defaults', 'layer_sin_values_visible', 'layer_sin_values', 'layer_sin_too_long', 'layer_scale'), 'ndarray',
        "create_sinusoidal_embeddings returns the numpy array, not a Tensor, so the layer's pos_encoding.data[np.newaxis, :seq_len] indexes a memoryview and raises TypeError."),

    Bug('bug_old_sin_returns_ndarray', OLDER,
        (('    return Tensor(table)\n', '    return table\n'), ),
        ('sin_fixed',), 'returns a numpy array, not a Tensor',
        "create_sinusoidal_embeddings returns the numpy array, not a Tensor; the layer still works (Tensor + array), but the signature says -> Tensor and the course's test reads pe.data[0]."),

    Bug('bug_old_sin_exponent_doubled', OLDER,
        (('    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n', '    inv_freq = np.exp(-math.log(10000.0) * 2 * even_cols / embed_dim)     # 1 / 10000^(2i/D)\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values'), '4i',
        'The frequency exponent is doubled: 10000^(4i/D) instead of 10000^(2i/D) (even_cols is already 2i).'),

    Bug('bug_new_sin_exponent_doubled', NEWER,
        (('    denom = np.power(10000.0, np.arange(0, embed_dim, 2, dtype=np.float64) / embed_dim)\n', '    denom = np.power(10000.0, 2 * np.arange(0, embed_dim, 2, dtype=np.float64) / embed_dim)\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'), '4i',
        'Newer: the frequency exponent is doubled, 10000^(4i/D) instead of 10000^(2i/D).'),

    Bug('bug_old_sin_log10', OLDER,
        (('    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n', '    inv_freq = np.exp(-math.log10(10000.0) * even_cols / embed_dim)       # 1 / 10000^(2i/D)\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values'), 'log10',
        'The exp form uses log10(10000) = 4 instead of ln(10000), so the frequencies are e^(-4*2i/D).'),

    Bug('bug_new_sin_log10', NEWER,
        (('    denom = np.power(10000.0, np.arange(0, embed_dim, 2, dtype=np.float64) / embed_dim)\n', '    denom = np.exp(np.arange(0, embed_dim, 2, dtype=np.float64) * math.log10(10000.0) / embed_dim)\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'), 'log10',
        'Newer: the denominator is exp(2i*log10(10000)/D) = e^(8i/D), log10 instead of ln.'),

    Bug('bug_old_sin_positions_from_1', OLDER,
        (('    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]   # (L, 1)\n', '    positions = np.arange(1, max_seq_len + 1, dtype=np.float64)[:, np.newaxis]   # positions 1..L\n'), ),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values'), 'from 1',
        'Sinusoid positions are counted from 1, so row 0 holds position 1 (not [0, 1, 0, 1, ...]).'),

    Bug('bug_new_sin_positions_from_1', NEWER,
        (('    pos = np.arange(max_seq_len, dtype=np.float64).reshape(-1, 1)\n', '    pos = np.arange(1, max_seq_len + 1, dtype=np.float64).reshape(-1, 1)\n'), ),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'), 'from 1',
        'Newer: sinusoid positions run 1..L instead of 0..L-1, so every row is shifted by one.'),

    Bug('bug_old_sin_exponent_sign', OLDER,
        (('    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n', '    inv_freq = np.exp(math.log(10000.0) * even_cols / embed_dim)          # 10000^(2i/D)\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values'), 'sign',
        'The sign of the exponent is flipped: angles are pos * 10000^(2i/D) instead of pos / 10000^(2i/D).'),

    Bug('bug_new_sin_exponent_sign', NEWER,
        (('    angles = pos / denom                                   # (max_seq_len, ceil(D/2))\n', '    angles = pos * denom                                   # (max_seq_len, ceil(D/2))\n'), ),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'), 'sign',
        'Newer: angles are pos * 10000^(2i/D) (exponent sign flipped) instead of pos / 10000^(2i/D).'),

    Bug('bug_old_sin_cos_first_stack', OLDER,
        (('    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n    return Tensor(table)\n', '    pairs = np.stack([np.cos(angles), np.sin(angles)], axis=-1)   # (L, ceil(D/2), 2)\n    table = pairs.reshape(max_seq_len, -1)[:, :embed_dim].astype(np.float32)\n    return Tensor(table)\n'), ),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values'), 'swapped',
        'sin and cos are swapped: the stacked pairs put cos in the even columns and sin in the odd ones.'),

    Bug('bug_new_sin_halves_concat', NEWER,
        (('    pe[:, 0::2] = np.sin(angles)\n    n_cos = embed_dim // 2\n    pe[:, 1::2] = np.cos(angles[:, :n_cos])\n', '    n_cos = embed_dim // 2\n    pe[:, :] = np.concatenate([np.sin(angles), np.cos(angles[:, :n_cos])], axis=1)\n'), ),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'), 'half',
        'Newer: sines fill the first half of the columns and cosines the second half instead of interleaving.'),

    Bug('bug_old_sin_odd_cos_full_width', OLDER,
        (('    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n', '    table[:, 1::2] = np.cos(angles)\n'), ),
        ('sin_pos0', 'sin_values'), 'odd',
        'The cosine columns are assigned all ceil(D/2) angle columns, so an odd embed_dim fails inside numpy (one column too many).'),

    Bug('bug_new_sin_odd_cos_full_width', NEWER,
        (('    n_cos = embed_dim // 2\n    pe[:, 1::2] = np.cos(angles[:, :n_cos])\n', '    pe[:, 1::2] = np.cos(angles)\n'), ),
        ('sin_pos0', 'sin_values'), 'odd',
        'Newer: the odd-embed_dim cut of the cosine part is deleted, so odd D fails inside numpy.'),

    Bug('bug_old_pe_whole_table', OLDER,
        (('        positions = self.position_embeddings[:seq_len]\n', '        positions = self.position_embeddings\n'), ),
        ('pe_broadcast', 'pe_too_long', 'pe_grad', 'layer_modes', 'layer_defaults', 'layer_scale'), '[:seq_len]',
        'PositionalEncoding adds the whole (max_seq_len, D) table instead of its first seq_len rows; numpy fails to broadcast unless seq_len == max_seq_len.'),

    Bug('bug_old_layer_sin_whole_table', OLDER,
        (('            h = h + self.pos_encoding[:seq_len]\n', '            h = h + self.pos_encoding  # (max_seq_len, D) sinusoids\n'), ),
        ('layer_modes', 'layer_sin_values_visible', 'layer_sin_values', 'layer_scale'), '[:seq_len]',
        'The sinusoidal mode adds the whole (max_seq_len, D) table instead of its first seq_len rows; numpy fails to broadcast unless seq_len == max_seq_len.'),

    Bug('bug_new_layer_sin_whole_table', NEWER,
        (('            table = self.pos_encoding[start_pos:start_pos + seq_len]\n            h = h + table.reshape(1, seq_len, embed_dim)\n', '            h = h + self.pos_encoding\n'), ),
        ('layer_modes', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos', 'layer_scale'), '[:seq_len]',
        'Newer: the sinusoidal mode adds the whole (max_seq_len, D) table, not the window [start_pos:start_pos+seq_len]; numpy fails to broadcast.'),

    Bug('bug_new_backward_fancy_rows', NEWER,
        (('        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n', '        ids2d = np.atleast_2d(np.asarray(self.indices, dtype=np.int64))\n        grads2d = upstream.reshape(ids2d.shape[0], ids2d.shape[1], -1)\n        for row_ids, row_grad in zip(ids2d, grads2d):   # one sequence at a time\n            grad_weight[row_ids] += row_grad\n'), ),
        ('grad_accumulate', 'grad_batch_visible', 'grad_batch'), 'np.add.at',
        "Newer backward does grad_weight[row_ids] += row_grad per sequence; fancy-index += keeps only one of a repeated id's rows instead of summing them."),

    Bug('bug_old_backward_fancy_rows', OLDER,
        (('#| export\nclass Embedding:\n', '#| export\nclass RowLoopBackward(EmbeddingBackward):\n    """My own version of the lookup\'s backward, one sequence at a time."""\n\n    def apply(self, grad_output):\n        weight, = self.saved_tensors\n        ids = self.indices.data if isinstance(self.indices, Tensor) else np.asarray(self.indices)\n        ids = ids.astype(int).reshape(-1, ids.shape[-1])\n        g = np.asarray(grad_output).reshape(ids.shape[0], ids.shape[1], -1)\n        grad = np.zeros_like(weight.data)\n        for row_ids, row_g in zip(ids, g):\n            grad[row_ids] += row_g\n        return (grad,)\n\n\nclass Embedding:\n'), ('            out._grad_fn = EmbeddingBackward(self.weight, indices)\n', '            out._grad_fn = RowLoopBackward(self.weight, indices)\n'), ),
        ('grad_accumulate', 'grad_batch_visible', 'grad_batch'), 'np.add.at',
        "The student's backward loops over sequences with grad[row_ids] += row_g; fancy-index += keeps only one of a repeated id's rows instead of summing them."),

    Bug('bug_old_float_ids_index', OLDER,
        (('        rows = self.weight.data[ids.astype(int)]\n', '        rows = self.weight.data[ids]\n'), ),
        ('emb_shape', 'emb_lookup', 'emb_large_ids', 'grad_accumulate', 'grad_sparse', 'grad_batch_visible', 'grad_batch', 'layer_modes', 'layer_defaults', 'layer_sin_values_visible', 'layer_sin_values', 'layer_scale', 'layer_sin_too_long', 'emb_index_error'), 'astype',
        'The lookup indexes the table with the float32 ids (no astype(int)); numpy raises IndexError.'),

    Bug('bug_new_float_ids_index', NEWER,
        (('        return EmbeddingFunction.apply(self.weight, indices=ids.astype(np.int64))\n', '        return EmbeddingFunction.apply(self.weight, indices=ids)\n'), ),
        ('emb_shape', 'emb_lookup', 'emb_index_error', 'emb_large_ids', 'grad_accumulate', 'grad_sparse', 'grad_batch_visible', 'grad_batch', 'layer_modes', 'layer_defaults', 'layer_sin_values_visible', 'layer_sin_values', 'layer_scale', 'layer_sin_too_long', 'layer_start_pos'), 'astype',
        'Newer: the float32 ids are passed to EmbeddingFunction without astype(int); numpy raises IndexError.'),

    Bug('bug_old_sin_fixed_512_rows', OLDER,
        (('    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]   # (L, 1)\n', "    positions = np.arange(512, dtype=np.float64)[:, np.newaxis]   # the layer's default length\n"), ('    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n', '    table = np.zeros((512, embed_dim), dtype=np.float32)\n'), ),
        ('sin_values',), '512',
        'create_sinusoidal_embeddings always builds 512 rows, ignoring max_seq_len.'),

    Bug('bug_new_sin_fixed_512_rows', NEWER,
        (('    pos = np.arange(max_seq_len, dtype=np.float64).reshape(-1, 1)\n', '    MAX_POSITIONS = 512\n    pos = np.arange(MAX_POSITIONS, dtype=np.float64).reshape(-1, 1)\n'), ('    pe = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n', '    pe = np.zeros((MAX_POSITIONS, embed_dim), dtype=np.float32)\n'), ),
        ('sin_values',), '512',
        'Newer: create_sinusoidal_embeddings always builds a 512-row table, ignoring max_seq_len.'),
)

STYLES = (
    Style('style_old_onehot_matmul', OLDER,
          (("        # fancy indexing gathers one row per id and keeps the id array's shape\n        rows = self.weight.data[ids.astype(int)]\n        out = Tensor(rows, requires_grad=self.weight.requires_grad)\n        if out.requires_grad:\n            out._grad_fn = EmbeddingBackward(self.weight, indices)\n        return out\n", "        # one-hot rows times the table: (..., V) @ (V, D) -> (..., D); the matmul's backward\n        # is one_hot^T @ grad, so a repeated token collects all of its gradient rows\n        one_hot = np.eye(self.vocab_size, dtype=np.float32)[ids.astype(int)]\n        return Tensor(one_hot) @ self.weight\n"), ),
          'lookup as a one-hot matrix product np.eye(V)[ids] @ W (Tensor matmul gives the backward); np.eye(V) is V*V floats, so a 66k vocabulary needs ~17 GB and may not fit the sandbox'),

    Style('style_old_np_take', OLDER,
          (('        rows = self.weight.data[ids.astype(int)]\n', '        rows = np.take(self.weight.data, ids.astype(np.int64), axis=0)\n'), ),
          'lookup with np.take(W, ids, axis=0) after a range check'),

    Style('style_old_pe_dim1_refused_numpy_mismatch', OLDER,
          (('        if embed_dim != self.embed_dim:\n            raise ValueError(\n                f"Expected embedding dimension {self.embed_dim}, got {embed_dim}"\n            )\n', '        if embed_dim == 1 and self.embed_dim != 1:\n            # a width-1 input would broadcast silently; any other width mismatch\n            # cannot broadcast and fails in the addition below\n            raise ValueError(f"x has embed_dim 1, the table has {self.embed_dim}")\n'), ),
          "PositionalEncoding refuses a last dim of 1 explicitly; any other wrong embed_dim fails inside numpy's broadcasting (ValueError from the addition), older course never tests a wrong embed_dim"),

    Style('style_old_pe_unpack_eafp', OLDER,
          (('        if len(x.shape) != 3:\n            raise ValueError(\n                f"PositionalEncoding expects (batch, seq_len, embed_dim), got shape {x.shape}"\n            )\n        batch_size, seq_len, embed_dim = x.shape\n        if seq_len > self.max_seq_len:\n            raise ValueError(\n                f"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}"\n            )\n        if embed_dim != self.embed_dim:\n            raise ValueError(\n                f"Expected embedding dimension {self.embed_dim}, got {embed_dim}"\n            )\n', '        try:\n            _, seq_len, width = x.shape\n        except ValueError:\n            raise ValueError(f"need a 3-D (batch, seq_len, embed_dim) input, got {x.shape}") from None\n        problems = []\n        if seq_len > self.max_seq_len:\n            problems.append(f"seq_len {seq_len} > max_seq_len {self.max_seq_len}")\n        if width != self.embed_dim:\n            problems.append(f"embed_dim {width} != {self.embed_dim}")\n        if problems:\n            raise ValueError("; ".join(problems))\n'), ),
          'PositionalEncoding validates by unpacking x.shape in try/except and collecting problems; own ValueErrors'),

    Style('style_old_pe_only_seq_len_check', OLDER,
          (('        if len(x.shape) != 3:\n            raise ValueError(\n                f"PositionalEncoding expects (batch, seq_len, embed_dim), got shape {x.shape}"\n            )\n        batch_size, seq_len, embed_dim = x.shape\n        if seq_len > self.max_seq_len:\n            raise ValueError(\n                f"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}"\n            )\n        if embed_dim != self.embed_dim:\n            raise ValueError(\n                f"Expected embedding dimension {self.embed_dim}, got {embed_dim}"\n            )\n\n        # (seq_len, embed_dim) broadcasts against (batch, seq_len, embed_dim)\n        positions = self.position_embeddings[:seq_len]\n        return x + positions\n', '        seq_len = x.shape[1]\n        if seq_len > self.max_seq_len:\n            raise ValueError(f"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}")\n        return x + self.position_embeddings[:seq_len]\n'), ),
          'PositionalEncoding without any validation except seq_len > max_seq_len (the older course never tests a wrong rank or embed_dim)'),

    Style('style_old_sin_python_loops', OLDER,
          (('    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]   # (L, 1)\n    even_cols = np.arange(0, embed_dim, 2, dtype=np.float64)              # the 2i values\n    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n    angles = positions * inv_freq                                         # (L, ceil(D/2))\n\n    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n    return Tensor(table)\n', '    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n    for pos in range(max_seq_len):\n        for i in range(0, embed_dim, 2):          # i is the even column 2k\n            angle = pos / (10000.0 ** (i / embed_dim))\n            table[pos, i] = math.sin(angle)\n            if i + 1 < embed_dim:                 # odd D: the last column has no cosine\n                table[pos, i + 1] = math.cos(angle)\n    return Tensor(table)\n'), ),
          'sinusoid table built with explicit Python loops and math.sin/math.cos'),

    Style('style_old_sin_np_outer', OLDER,
          (('    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]   # (L, 1)\n    even_cols = np.arange(0, embed_dim, 2, dtype=np.float64)              # the 2i values\n    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n    angles = positions * inv_freq                                         # (L, ceil(D/2))\n\n    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n    return Tensor(table)\n', '    freqs = 1.0 / np.power(10000.0, np.arange(0, embed_dim, 2) / embed_dim)\n    angles = np.outer(np.arange(max_seq_len), freqs)\n    table = np.empty((max_seq_len, embed_dim), dtype=np.float32)\n    table[:, ::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles)[:, :embed_dim // 2]\n    return Tensor(table)\n'), ),
          'sinusoid angles with np.outer(positions, 1/10000^(2i/D)), np.empty table'),

    Style('style_old_sin_stack_interleave', OLDER,
          (('    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n    return Tensor(table)\n', '    pairs = np.stack([np.sin(angles), np.cos(angles)], axis=-1)   # (L, ceil(D/2), 2)\n    table = pairs.reshape(max_seq_len, -1)[:, :embed_dim].astype(np.float32)\n    return Tensor(table)\n'), ),
          'sin/cos interleaved by np.stack(..., axis=-1).reshape and cut to D columns (odd D drops the last cos)'),

    Style('style_old_scale_pow_half', OLDER,
          (('            h = h * math.sqrt(self.embed_dim)\n', '            h = h * (self.embed_dim ** 0.5)\n'), ),
          'EmbeddingLayer scales with embed_dim ** 0.5 instead of math.sqrt'),

    Style('style_old_helpers_renamed', OLDER,
          (('#| export\nclass Embedding:\n', '#| export\ndef glorot_limit(fan_in: int, fan_out: int) -> float:\n    return math.sqrt(6.0 / (fan_in + fan_out))\n\n\ndef checked_ids(tokens: Tensor, n_rows: int) -> np.ndarray:\n    """The ids as int64, after making sure each one names a row of the table."""\n    raw = np.asarray(tokens.data)\n    if raw.size > 0:\n        lo, hi = raw.min(), raw.max()\n        if lo < 0 or hi >= n_rows:\n            raise ValueError(f"token id out of range [0, {n_rows}): saw {lo}..{hi}")\n    return raw.astype(np.int64)\n\n\nclass Embedding:\n'), ('        bound = math.sqrt(6.0 / (vocab_size + embed_dim))\n        table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))\n        self.weight = Tensor(table, requires_grad=True)\n', '        lim = glorot_limit(vocab_size, embed_dim)\n        self.weight = Tensor(np.random.uniform(low=-lim, high=lim, size=(vocab_size, embed_dim)),\n                             requires_grad=True)\n'), ('        ids = indices.data\n        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n                f"Token ids must be in [0, {self.vocab_size}); "\n                f"got min={ids.min()}, max={ids.max()}"\n            )\n\n        # fancy indexing gathers one row per id and keeps the id array\'s shape\n        rows = self.weight.data[ids.astype(int)]\n        out = Tensor(rows, requires_grad=self.weight.requires_grad)\n        if out.requires_grad:\n            out._grad_fn = EmbeddingBackward(self.weight, indices)\n        return out\n', '        idx = checked_ids(indices, self.vocab_size)\n        looked_up = Tensor(self.weight.data[idx], requires_grad=self.weight.requires_grad)\n        if looked_up.requires_grad:\n            looked_up._grad_fn = EmbeddingBackward(self.weight, indices)\n        return looked_up\n'), ),
          'module-level helpers glorot_limit/checked_ids, different variable names'),

    Style('style_new_backward_row_loop', NEWER,
          (('        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n', '        for k, row in enumerate(flat_ids):            # one gradient row per looked-up id\n            np.add(grad_weight[row], upstream[k], out=grad_weight[row])\n'), ),
          'backward accumulates with a Python for loop and np.add(..., out=row view) per id'),

    Style('style_new_no_fraction_nan_check', NEWER,
          (('        if not np.all(np.isfinite(ids)):\n            raise ValueError("Token ids must be finite (found NaN or inf)")\n        if np.any(ids != np.round(ids)):\n            raise ValueError("Token ids must be whole numbers")\n', ''), ),
          'no check for fractional/NaN/inf ids (the newer docstring asks only for the lookup through EmbeddingFunction.apply; the check is only in the solution block); range check kept'),

    Style('style_new_start_pos_typeerror', NEWER,
          (('        if not isinstance(start_pos, (int, np.integer)) or start_pos < 0:\n            raise ValueError(f"start_pos must be a non-negative integer, got {start_pos!r}")\n', '        if start_pos < 0:\n            raise ValueError(f"start_pos must be >= 0, got {start_pos}")\n'), ),
          'start_pos not type-checked: start_pos=1.5 raises TypeError from the slice, negative still ValueError'),

    Style('style_new_empty_ids_max', NEWER,
          (('        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n', '        if (ids < 0).any() or ids.max() >= self.vocab_size:\n'), ),
          "range check with ids.max() and no size guard: empty ids raise numpy's ValueError (empty input is never asked for)"),

    Style('style_new_np_take', NEWER,
          (('        return weight[self.indices]\n', '        return np.take(weight, self.indices, axis=0)\n'), ),
          'EmbeddingFunction.forward gathers with np.take(weight, ids, axis=0)'),

    Style('style_new_sin_exp_log', NEWER,
          (('    pos = np.arange(max_seq_len, dtype=np.float64).reshape(-1, 1)\n    denom = np.power(10000.0, np.arange(0, embed_dim, 2, dtype=np.float64) / embed_dim)\n    angles = pos / denom                                   # (max_seq_len, ceil(D/2))\n', '    two_i = 2.0 * np.arange((embed_dim + 1) // 2)          # 0, 2, 4, ...\n    inv_freq = np.exp(two_i * (-math.log(10000.0) / embed_dim))\n    angles = np.arange(max_seq_len)[:, None] * inv_freq[None, :]\n'), ),
          'sinusoid frequencies in the exp(-2i*ln(10000)/D) form'),

    Style('style_new_pe_shape_tuple_check', NEWER,
          (('        if len(x.shape) != 3:\n            raise ValueError(f"Expected (batch, seq_len, embed_dim), got shape {x.shape}")\n        batch_size, seq_len, embed_dim = x.shape\n        if embed_dim != self.embed_dim:\n            raise ValueError(f"embed_dim mismatch: table has {self.embed_dim}, input has {embed_dim}")\n', '        if len(x.shape) != 3 or tuple(x.shape[2:]) != (self.embed_dim,):\n            raise ValueError(f"x must be (batch, seq_len, {self.embed_dim}), got {x.shape}")\n        seq_len, embed_dim = x.shape[1], self.embed_dim\n'), ),
          'PositionalEncoding checks rank and embed_dim in one tuple comparison; its own ValueError'),

    Style('style_new_renamed_pow_broadcast', NEWER,
          (('            h = h * math.sqrt(self.embed_dim)\n', '            h = h * self.embed_dim ** 0.5\n'), ('        window = self.position_embeddings[start_pos:start_pos + seq_len]   # (T, D), still in the graph\n        return x + window.reshape(1, seq_len, embed_dim)\n', '        rows_used = self.position_embeddings[start_pos:start_pos + seq_len]\n        return x + rows_used          # (T, D) broadcasts over the batch axis\n'), ),
          'newer generation with ** 0.5 scaling and a plain broadcast of the (T, D) window (no reshape)'),

    Style('style_old_take_wrap_no_check', OLDER,
          (('        ids = indices.data\n        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n                f"Token ids must be in [0, {self.vocab_size}); "\n                f"got min={ids.min()}, max={ids.max()}"\n            )\n\n        # fancy indexing gathers one row per id and keeps the id array\'s shape\n        rows = self.weight.data[ids.astype(int)]\n', "        ids = indices.data.astype(int)\n        # mode='wrap' keeps every id inside the table, so no range check is needed\n        rows = np.take(self.weight.data, ids, axis=0, mode='wrap')\n"), ),
          "The lookup uses np.take(..., mode='wrap') with no range check, so out-of-range ids wrap around instead of raising ValueError."),
    Style("style_newer_layer_sin_no_own_length_check", NEWER,
          (("            if start_pos + seq_len > self.max_seq_len:\n                raise ValueError(f\"Sequence of {seq_len} "
            "from {start_pos} exceeds max_seq_len={self.max_seq_len}\")\n", ""),),
          "Newer generation: the sinusoidal mode has no length check of its own; numpy's ValueError refuses a "
          "too-long sequence, which the assignment accepts (it names the class, not who raises it)."),
    Style("style_newer_length_check_numpy_refuses_past_end", NEWER,
          (("        if start_pos + seq_len > self.max_seq_len:\n            raise ValueError(\n                f\"Positions",
            "        if seq_len > self.max_seq_len:\n            raise ValueError(\n                f\"Positions"),),
          "Newer generation: the length check leaves out start_pos; past the table's end numpy's ValueError "
          "refuses instead."),
    Style('style_older_range_check_np_all', OLDER,
          (('if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):', 'if ids.size and (np.all(ids < 0) or np.all(ids >= self.vocab_size)):'),),
          'Older generation: the range check fires only when all ids are bad; the older course never asks for a range check.', note='emb_index_error'),
    Style('style_older_pe_no_dim_check', OLDER,
          (('        if embed_dim != self.embed_dim:\n            raise ValueError(\n                f"Expected embedding dimension {self.embed_dim}, got {embed_dim}"\n            )\n', ''),),
          'Older generation: no embed_dim check in PositionalEncoding, which the older course never asks for.', note='pe_bad_shape'),
    Style('style_older_empty_ids_raise', OLDER,
          (('if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):', 'if ids.min() < 0 or ids.max() >= self.vocab_size:'),),
          'Older generation: an empty id array raises (ids.min() unguarded); no text or test gives empty ids.', note='emb_shape'),
    Style('style_older_ids_clipped', OLDER,
          (('        ids = indices.data\n        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):\n            raise ValueError(\n                f"Token ids must be in [0, {self.vocab_size}); "\n                f"got min={ids.min()}, max={ids.max()}"\n            )\n', '        # unknown ids fall back to the nearest valid row instead of crashing\n        ids = np.clip(indices.data, 0, self.vocab_size - 1)\n'),),
          'Older generation: out-of-range ids are clipped instead of refused; the older course never asks for a range check.', note='emb_index_error'),
    Style('style_newer_fraction_accepted', NEWER,
          (('        if np.any(ids != np.round(ids)):\n            raise ValueError("Token ids must be whole numbers")\n', ''),),
          "Newer generation: no whole-number check of the ids; the module asks only for the range check (the check is in the official solution's body).", note='emb_bad_ids'),
)
