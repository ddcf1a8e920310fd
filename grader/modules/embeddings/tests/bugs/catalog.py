"""Small bug notebooks for the module-11 checks: a correct notebook of ours with one realistic bug.

Each entry names its base notebook in ``submissions/``, the edit (old text -> new text, each
found exactly once in the base's code cells), the checks that must fail, and a piece of the
likely cause the first of them must give. ``python -m grader.modules.embeddings.tests.bugs.catalog`` rewrites the
notebooks; ``grader/modules/embeddings/tests/test_checks.py`` grades them and checks that they are in sync.
"""

from __future__ import annotations

from typing import Any

from .audit import AUDIT_BUGS, AUDIT_STYLES
from .families import FAMILY_BUGS
from .families import STYLES as FAMILY_STYLES
from .kinds import HERE, NEWER, OLDER, Bug, Style, build_notebook
from .redteam import REDTEAM_BUGS, REDTEAM_STYLES

__all__ = ["BUGS", "NEWER", "OLDER", "STYLES", "Bug", "Style", "build"]
SUBMISSIONS = HERE.parents[4] / "submissions"  # module 11's golden notebooks: the repository's demo material


BUGS: tuple[Bug, ...] = (
    Bug("bug_ids_int16", OLDER,
        (("rows = self.weight.data[ids.astype(int)]", "rows = self.weight.data[ids.astype(np.int16)]"),),
        ("emb_large_ids",), "went through int16, which wraps at 32768",
        "The lookup casts ids to int16 (to save memory), so ids from 32768 on wrap to negative rows."),
    Bug("bug_emb_no_attrs", OLDER,
        (("        self.vocab_size = vocab_size\n        self.embed_dim = embed_dim\n\n        # Glorot", "        # Glorot"),
         ("if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):",
          "if ids.size and (ids.min() < 0 or ids.max() >= self.weight.shape[0]):"),
         ('f"Token ids must be in [0, {self.vocab_size}); "', 'f"Token ids must be in [0, {self.weight.shape[0]}); "'),
         ('return f"Embedding(vocab_size={self.vocab_size}, embed_dim={self.embed_dim})"',
          'return f"Embedding(vocab_size={self.weight.shape[0]}, embed_dim={self.weight.shape[1]})"')),
        ("emb_attrs",), "no vocab_size",
        "Embedding never stores vocab_size and embed_dim; it reads the sizes from weight.shape instead."),
    Bug("bug_xavier_checkerboard", OLDER,
        (("table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))",
          "signs = (np.arange(vocab_size)[:, None] + np.arange(embed_dim)) % 2\n"
          "        table = bound * (1.0 - 2.0 * signs)  # deterministic, right bound and spread"),),
        ("emb_xavier",), "only 2 distinct values",
        "The table is a deterministic ±limit checkerboard: the right bound and spread, but not a uniform draw."),
    Bug("bug_pe_init_normal", OLDER,
        (("np.random.uniform(-bound, bound, size=(max_seq_len, embed_dim)),",
          "np.random.normal(0.0, 0.02, size=(max_seq_len, embed_dim)),"),),
        ("pe_init",), "normally distributed",
        "The position table is drawn as in GPT-2, normal with std 0.02, not uniformly from ±sqrt(2/D)."),
    Bug("bug_pe_positions_off_by_one", OLDER,
        (("positions = self.position_embeddings[:seq_len]", "positions = self.position_embeddings[1:seq_len + 1]"),),
        ("pe_broadcast", "pe_too_long", "pe_grad", "layer_defaults", "layer_scale"), "positions are off by one",
        "Positions start at row 1; a sequence of max_seq_len then fails inside numpy (one row short)."),
    Bug("bug_layer_default_max_len", OLDER,
        (("def __init__(self, vocab_size: int, embed_dim: int, max_seq_len: int = 512,",
          "def __init__(self, vocab_size: int, embed_dim: int, max_seq_len: int = 256,"),),
        ("layer_defaults",), "max_seq_len defaults to 256",
        "EmbeddingLayer's max_seq_len defaults to 256 instead of the course's 512."),
    Bug("bug_layer_sin_not_added", OLDER,
        (("            h = h + self.pos_encoding[:seq_len]",
          "            positions = self.pos_encoding[:seq_len]\n            h + positions"),),
        ('layer_sin_values_visible', 'layer_sin_values', 'layer_scale'), "the sinusoid table was not added",
        "The sinusoidal mode computes `h + positions` but never assigns it, so no positions are added."),
    Bug("bug_layer_sin_rows_from_1", OLDER,
        (("            h = h + self.pos_encoding[:seq_len]", "            h = h + self.pos_encoding[1:seq_len + 1]"),),
        ('layer_sin_values_visible', 'layer_sin_values', 'layer_defaults', 'layer_scale', 'layer_sin_too_long'),
        "your create_sinusoidal_embeddings is right, but the table the layer adds is not",
        "The sinusoidal mode adds rows 1 .. seq_len of a correct table (positions counted from 1)."),
    Bug("bug_newer_backward_aliases_weight", NEWER,
        (("        grad_weight = np.zeros_like(weight.data)\n",
          "        grad_weight = weight.data  # reuse the table's memory\n        grad_weight[...] = 0.0\n"),),
        ("grad_keeps_weight",), "wrote the gradient into the weight table",
        "Newer generation: backward reuses weight.data as the gradient buffer, so the right gradient wipes the table."),
    Bug("bug_newer_backward_first_row", NEWER,
        (("        flat_ids = np.asarray(self.indices, dtype=np.int64).reshape(-1)\n"
          "        upstream = np.asarray(grad_output).reshape(flat_ids.shape[0], -1)\n",
          "        ids = np.asarray(self.indices, dtype=np.int64)\n        upstream = np.asarray(grad_output)\n"
          "        if ids.ndim == 2:  # drop the batch axis\n            ids, upstream = ids[0], upstream[0]\n"
          "        flat_ids = ids.reshape(-1)\n        upstream = upstream.reshape(flat_ids.shape[0], -1)\n"),),
        ("grad_batch_visible", "grad_batch"), "only the first batch element contributed",
        "Newer generation: backward keeps only batch row 0 of 2-D ids and their gradient."),
    Bug("bug_newer_backward_average", NEWER,
        (("        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n",
          "        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n"
          "        counts = np.bincount(flat_ids, minlength=grad_weight.shape[0])\n"
          "        grad_weight /= np.maximum(counts, 1)[:, None]  # mean per token\n"),),
        ("grad_accumulate", "grad_batch_visible", "grad_batch"), "mean of its two gradient rows",
        "Newer generation: backward divides each row by how often its token occurs (a mean, not a sum)."),
    Bug("bug_newer_start_pos_ignored", NEWER,
        (("window = self.position_embeddings[start_pos:start_pos + seq_len]",
          "window = self.position_embeddings[:seq_len]"),),
        ("pe_start_pos", "layer_start_pos"), "start_pos is ignored by forward",
        "Newer generation: PositionalEncoding checks start_pos but always adds the first seq_len rows."),
    Bug("bug_newer_call_drops_start_pos", NEWER,
        (("    def __call__(self, x: Tensor, start_pos: int = 0) -> Tensor:\n        return self.forward(x, start_pos)",
          "    def __call__(self, x: Tensor, start_pos: int = 0) -> Tensor:\n        return self.forward(x)"),),
        ("pe_start_pos", "layer_start_pos"), "__call__ drops start_pos",
        "Newer generation: PositionalEncoding.__call__ accepts start_pos but does not pass it to forward."),
    Bug("bug_newer_backward_int16", NEWER,
        (("        flat_ids = np.asarray(self.indices, dtype=np.int64).reshape(-1)\n",
          "        flat_ids = np.asarray(self.indices, dtype=np.int16).reshape(-1)  # ids are small\n"),),
        ("emb_large_ids",), "the backward casts the ids to int16",
        "Newer generation: the forward casts ids to int64, the backward to int16, so large ids train the wrong rows."),
    Bug("bug_newer_sin_cos_swapped", NEWER,
        (("    pe[:, 0::2] = np.sin(angles)\n    n_cos = embed_dim // 2\n    pe[:, 1::2] = np.cos(angles[:, :n_cos])\n",
          "    pe[:, 0::2] = np.cos(angles)\n    n_cos = embed_dim // 2\n    pe[:, 1::2] = np.sin(angles[:, :n_cos])\n"),),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'),
        "sin and cos are swapped",
        "Newer generation: even columns get cos and odd columns sin; the layer checks point to sin_values."),
    Bug("bug_newer_layer_sin_start_pos", NEWER,
        (("table = self.pos_encoding[start_pos:start_pos + seq_len]", "table = self.pos_encoding[:seq_len]"),),
        ("layer_start_pos",), "start_pos is ignored by forward",
        "Newer generation: the sinusoidal mode of EmbeddingLayer always adds the first seq_len rows."),
    Bug("bug_layer_none_no_attr", OLDER,
        (("        else:\n            self.pos_encoding = None\n", ""),),
        ("layer_attrs",), "has no pos_encoding attribute",
        "EmbeddingLayer sets self.pos_encoding only for 'learned' and 'sinusoidal', so the None mode has no such attribute."),
    Bug("bug_newer_layer_no_vocab_size", NEWER,
        (("        self.vocab_size = vocab_size\n        self.embed_dim = embed_dim\n        self.max_seq_len = max_seq_len\n",
          "        self.embed_dim = embed_dim\n        self.max_seq_len = max_seq_len\n"),
         ('return (f"EmbeddingLayer(vocab_size={self.vocab_size}, embed_dim={self.embed_dim}, "',
          'return (f"EmbeddingLayer(vocab_size={self.token_embedding.vocab_size}, embed_dim={self.embed_dim}, "')),
        ("layer_attrs",), "EmbeddingLayer has no vocab_size attribute",
        "Newer generation: EmbeddingLayer keeps vocab_size only inside its token Embedding, not as its own attribute."),
    Bug("bug_newer_sin_table_trainable", NEWER,
        (("    return Tensor(pe)\n", "    return Tensor(pe, requires_grad=True)\n"),),
        ("sin_fixed",), "created with requires_grad=True",
        "Newer generation: the fixed sinusoid table is created with requires_grad=True, so it collects gradients."),
    Bug("bug_newer_backward_float16", NEWER,
        (("        grad_weight = np.zeros_like(weight.data)\n",
          "        grad_weight = np.zeros_like(weight.data, dtype=np.float16)  # half the memory\n"),),
        ("grad_accumulate",), "float16 precision only",
        "Newer generation: backward accumulates the gradient in float16, so gradient values lose all but 11 bits."),
    Bug("bug_layer_1d_axis_last", OLDER,
        (("tokens = Tensor(tokens.data[np.newaxis, :])", "tokens = Tensor(tokens.data[:, np.newaxis])"),
         ("            h = h[0]\n", "            h = h.reshape(h.shape[0], self.embed_dim)\n")),
        ("layer_sin_values_visible", "layer_sin_values"), "every token got position 0",
        "For 1-D tokens the layer adds the new axis last, (seq, 1): every token is a one-token sequence at position 0."),
    Bug("bug_pe_x_detached", OLDER,
        (("        return x + positions\n", "        return x.data + positions\n"),),
        ("pe_grad",), "none reached x",
        "PositionalEncoding adds the rows to x.data, not to x: the table still learns, but no gradient goes back to x."),
    Bug("bug_sin_halves", OLDER,
        (("    table[:, 0::2] = np.sin(angles)\n    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])\n",
          "    half = angles.shape[1]\n    table[:, :half] = np.sin(angles)\n"
          "    table[:, half:] = np.cos(angles[:, : embed_dim // 2])\n"),),
        ('sin_pos0', 'sin_values', 'layer_sin_values_visible', 'layer_sin_values'), "concatenated",
        "The sines fill the first half of the columns and the cosines the second half, instead of alternating."),
    Bug("bug_scale_by_sqrt_seq_len", OLDER,
        (("h = h * math.sqrt(self.embed_dim)", "h = h * math.sqrt(tokens.shape[1])"),),
        ("layer_scale",), "multiplied by 1.732 (= sqrt(3))",
        "scale_embeddings multiplies by the square root of the sequence length instead of sqrt(embed_dim)."),
    Bug("bug_layer_positions_twice", OLDER,
        (("            h = self.pos_encoding.forward(h)\n",
          "            h = self.pos_encoding.forward(h)\n"
          "            h = h + self.pos_encoding.position_embeddings[:h.shape[1]]\n"),),
        ("layer_defaults", "layer_scale"), "added twice",
        "The learned mode adds the position rows itself after the PositionalEncoding has added them already."),
    Bug("bug_newer_backward_mean_over_ids", NEWER,
        (("        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n",
          "        np.add.at(grad_weight, flat_ids, upstream)  # repeated ids accumulate\n"
          "        grad_weight /= len(flat_ids)  # average over the tokens\n"),),
        ("grad_accumulate", "grad_sparse", "grad_batch_visible", "grad_batch", "emb_large_ids"),
        "the gradient is scaled by 1/N, N = the number of ids",
        "Newer generation: backward divides the whole gradient by the number of ids (a mean over the tokens)."),
    Bug("bug_sin_odd_width", OLDER,
        (("    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)\n",
          "    width = embed_dim + embed_dim % 2                                     # whole (sin, cos) pairs\n"
          "    inv_freq = np.exp(-math.log(10000.0) * even_cols / width)             # 1 / 10000^(2i/D)\n"),),
        ("sin_values",), "the exponent divides by D + 1",
        "For an odd embed_dim the frequencies divide by D + 1, the width rounded up to whole (sin, cos) pairs."),
    Bug("bug_newer_start_pos_window_end", NEWER,
        (("window = self.position_embeddings[start_pos:start_pos + seq_len]",
          "window = self.position_embeddings[start_pos:seq_len]"),),
        ("pe_start_pos", "layer_start_pos"), "the window for start_pos is not seq_len (",
        "Newer generation: PositionalEncoding's window ends at seq_len, not at start_pos + seq_len, so it is too short."),
    Bug("bug_shared_table", OLDER,
        (("#| export\nclass Embedding:\n", "#| export\n_TABLES = {}  # (vocab_size, embed_dim) -> weight Tensor\n\n\n"
          "class Embedding:\n"),
         ("        table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))\n"
          "        self.weight = Tensor(table, requires_grad=True)\n",
          "        # one table per size, reused by every Embedding of that size (saves memory)\n"
          "        if (vocab_size, embed_dim) not in _TABLES:\n"
          "            table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))\n"
          "            _TABLES[vocab_size, embed_dim] = Tensor(table, requires_grad=True)\n"
          "        self.weight = _TABLES[vocab_size, embed_dim]\n")),
        ("grad_sparse",), "two Embedding(4, 2) share one weight Tensor",
        "Every Embedding of one size reuses a module-level table, so two of them share weights and gradients."),
    Bug("bug_table_transposed", OLDER,
        (("table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))",
          "table = np.random.uniform(-bound, bound, size=(embed_dim, vocab_size))  # one column per token"),
         ("rows = self.weight.data[ids.astype(int)]", "rows = self.weight.data.T[ids.astype(int)]")),
        ("emb_lookup", "emb_large_ids", "emb_xavier", "grad_accumulate", "grad_sparse", "grad_batch_visible",
         "grad_batch", "layer_defaults", "layer_sin_values_visible", "layer_sin_values", "layer_scale"),
        "the embedding table is stored transposed, as (embed_dim, vocab_size) = (2, 4)",
        "The embedding table is created as (embed_dim, vocab_size), one column per token, and read through .T."),
    Bug("bug_newer_backward_grad_for_indices", NEWER,
        (("        return (grad_weight,)\n", "        return (None, grad_weight)  # (indices, weight)\n"),),
        ("grad_accumulate", "grad_sparse", "grad_batch_visible", "grad_batch", "emb_large_ids"),
        "its backward gave the weight no gradient",
        "Newer generation: backward returns (None, grad_weight), as if the ids were a first input, so the weight gets None."),
    Bug("bug_newer_backward_bare_gradient", NEWER,
        (("        return (grad_weight,)\n", "        return grad_weight\n"),),
        ("grad_accumulate", "grad_sparse", "grad_batch_visible", "grad_batch", "emb_large_ids"),
        "not a one-element tuple",
        "Newer generation: backward returns the gradient array itself, not (grad_weight,), so the weight gets its first row."),
    Bug("bug_newer_sin_float16", NEWER,
        (("    pe = np.zeros((max_seq_len, embed_dim), dtype=np.float32)\n",
          "    pe = np.zeros((max_seq_len, embed_dim), dtype=np.float16)  # half the memory\n"),),
        ('sin_values', 'layer_sin_values_visible', 'layer_sin_values', 'layer_start_pos'),
        "float16 precision only",
        "Newer generation: the sinusoid table is filled in a float16 array, so its values keep only 11 bits."),
    Bug("bug_newer_pe_rewrapped", NEWER,
        (("        return x + window.reshape(1, seq_len, embed_dim)\n",
          "        return x + Tensor(window.data.reshape(1, seq_len, embed_dim))\n"),),
        ("pe_grad", "pe_start_pos"), "the gradient never reached position_embeddings",
        "Newer generation: PositionalEncoding rewraps the window's data in a new Tensor, so no gradient reaches the table."),
)


def code_sources(nb: dict[str, Any]) -> list[str]:
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def build(bug: Bug | Style) -> str:
    """The bug's notebook as JSON text: its base in submissions/ with its edits."""
    return build_notebook(bug, SUBMISSIONS)


BUGS = BUGS + FAMILY_BUGS + REDTEAM_BUGS + AUDIT_BUGS
STYLES = FAMILY_STYLES + REDTEAM_STYLES + AUDIT_STYLES

if __name__ == "__main__":
    entries: tuple[Bug | Style, ...] = (*BUGS, *STYLES)
    for bug in entries:
        bug.path.write_text(build(bug), encoding="utf-8")
        print(bug.path.name)
