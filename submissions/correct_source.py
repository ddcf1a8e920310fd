# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.17.1
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
"""
# Module 11: Embeddings - From Token IDs to Vectors

The tokenizer from Module 10 hands us integer ids. A network can't do much with the
raw integer 4172: the number itself carries no meaning and its size is arbitrary.
In this module you give every token a learnable vector and teach the model where
in the sequence each token sits.

## What you'll build
- `Embedding`: a trainable table with one row per vocabulary entry
- `PositionalEncoding`: a trainable table with one row per sequence position
- `create_sinusoidal_embeddings`: the fixed sine/cosine position table
- `EmbeddingLayer`: tokens + positions in a single layer

## Where this goes
Development happens in this notebook; `tito module complete 11` exports the
`#| export` cells into `tinytorch.core.embeddings`:

```python
from tinytorch.core.embeddings import Embedding, PositionalEncoding, EmbeddingLayer
```
"""

# %%
#| default_exp core.embeddings

# %%
#| export
import numpy as np
import math
from typing import List, Optional

# Building blocks from earlier modules
from tinytorch.core.tensor import Tensor
from tinytorch.core.autograd import EmbeddingBackward

# used by the memory analysis at the end of the module
BYTES_PER_FLOAT32 = 4
BYTES_PER_MB = 1024 * 1024

# %% [markdown]
"""
## 1. Token embeddings

An embedding table is a matrix `W` of shape `(vocab_size, embed_dim)`. Looking up a
token is just reading one row:

```
ids:     [5, 1, 5]
output:  [W[5], W[1], W[5]]      shape (3, embed_dim)
```

Batched ids `(batch, seq_len)` give `(batch, seq_len, embed_dim)`: NumPy's fancy
indexing keeps the shape of the index array and appends the row dimension.

Mathematically the lookup equals `one_hot(ids) @ W`, so in the backward pass every
output row sends its gradient back to the row it was read from. When a token
appears twice, its row collects *both* gradients. Module 05 gave you
`EmbeddingBackward`, which does exactly that.

**Initialisation.** We use Xavier/Glorot uniform: values drawn from
`U(-b, b)` with `b = sqrt(6 / (vocab_size + embed_dim))`.
"""

# %% nbgrader={"grade": false, "grade_id": "embedding-class", "solution": true}
#| export
class Embedding:
    """
    Trainable lookup table mapping integer token ids to dense vectors.

    TODO: Create the (vocab_size, embed_dim) weight table and implement the lookup.

    STEPS:
    1. Keep vocab_size and embed_dim as attributes.
    2. Fill the table with Xavier-uniform values in [-b, b], b = sqrt(6 / (vocab_size + embed_dim)).
    3. forward(): reject ids outside [0, vocab_size) with a ValueError, then gather the rows.
    4. Attach EmbeddingBackward so gradients reach the table.

    EXAMPLE:
    >>> emb = Embedding(vocab_size=10, embed_dim=4)
    >>> emb(Tensor([[1, 5, 5]])).shape
    (1, 3, 4)
    """

    ### BEGIN SOLUTION
    def __init__(self, vocab_size: int, embed_dim: int):
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim

        # Glorot/Xavier uniform keeps the scale of the looked-up vectors sensible
        bound = math.sqrt(6.0 / (vocab_size + embed_dim))
        table = np.random.uniform(-bound, bound, size=(vocab_size, embed_dim))
        self.weight = Tensor(table, requires_grad=True)

    def forward(self, indices: Tensor) -> Tensor:
        ids = indices.data
        if ids.size and (ids.min() < 0 or ids.max() >= self.vocab_size):
            raise ValueError(
                f"Token ids must be in [0, {self.vocab_size}); "
                f"got min={ids.min()}, max={ids.max()}"
            )

        # fancy indexing gathers one row per id and keeps the id array's shape
        rows = self.weight.data[ids.astype(int)]
        out = Tensor(rows, requires_grad=self.weight.requires_grad)
        if out.requires_grad:
            out._grad_fn = EmbeddingBackward(self.weight, indices)
        return out

    def __call__(self, indices: Tensor) -> Tensor:
        return self.forward(indices)

    def parameters(self) -> List[Tensor]:
        return [self.weight]

    def __repr__(self) -> str:
        return f"Embedding(vocab_size={self.vocab_size}, embed_dim={self.embed_dim})"
    ### END SOLUTION

# %% [markdown]
"""
### 🧪 Unit Test: Embedding

Checks output shapes for single and batched sequences, that equal ids give equal
vectors, and that the table is exposed as a trainable parameter.
"""

# %% nbgrader={"grade": true, "grade_id": "test-embedding", "locked": true, "points": 10}
def test_unit_embedding():
    """🔬 Unit test for the Embedding lookup table."""
    print("🔬 Unit Test: Embedding...")

    emb = Embedding(vocab_size=50, embed_dim=16)

    out = emb.forward(Tensor([3, 7, 3]))
    assert out.shape == (3, 16), f"1-D ids should give (3, 16), got {out.shape}"
    assert np.allclose(out.data[0], out.data[2]), "The same id must map to the same vector"

    batch = emb(Tensor([[1, 2], [3, 4], [5, 6]]))
    assert batch.shape == (3, 2, 16), f"Batched ids should give (3, 2, 16), got {batch.shape}"

    params = emb.parameters()
    assert len(params) == 1, "Embedding has exactly one parameter tensor"
    assert params[0].shape == (50, 16), f"Table shape should be (50, 16), got {params[0].shape}"
    assert params[0].requires_grad, "The table must be trainable"

    print("✅ Embedding passed!")

if __name__ == "__main__":
    test_unit_embedding()

# %% [markdown]
"""
## 2. Learned positional encoding

Attention treats its inputs as a *set*: shuffle the tokens and (without extra
information) the outputs shuffle the same way. To tell "dog bites man" from
"man bites dog" we add a position vector to every token vector.

The learned variant (GPT-2, BERT) keeps a second trainable table `P` of shape
`(max_seq_len, embed_dim)`. For an input `x` of shape `(batch, seq_len, embed_dim)`:

```
out[b, t, :] = x[b, t, :] + P[t, :]
```

Only the first `seq_len` rows are used, and they are shared by every sequence in the
batch, so during backprop row `t` receives the gradient summed over the batch.
A learned table has a hard length limit: there is no row for position `max_seq_len`.
"""

# %% nbgrader={"grade": false, "grade_id": "positional-encoding", "solution": true}
#| export
class PositionalEncoding:
    """
    Learned positional encoding: one trainable vector per position.

    TODO: Create a (max_seq_len, embed_dim) trainable table and add its first
    seq_len rows to every sequence in the batch.

    STEPS:
    1. Initialise uniformly in [-b, b] with b = sqrt(2 / embed_dim).
    2. forward(x): x must be (batch, seq_len, embed_dim); raise ValueError for
       a wrong rank, a sequence longer than max_seq_len, or a wrong embed_dim.
    3. Add rows 0..seq_len-1 of the table; broadcasting covers the batch.

    HINT: slice the Tensor itself, not its .data, or the table never
    receives a gradient.
    """

    ### BEGIN SOLUTION
    def __init__(self, max_seq_len: int, embed_dim: int):
        self.max_seq_len = max_seq_len
        self.embed_dim = embed_dim

        bound = math.sqrt(2.0 / embed_dim)
        self.position_embeddings = Tensor(
            np.random.uniform(-bound, bound, size=(max_seq_len, embed_dim)),
            requires_grad=True,
        )

    def forward(self, x: Tensor) -> Tensor:
        if len(x.shape) != 3:
            raise ValueError(
                f"PositionalEncoding expects (batch, seq_len, embed_dim), got shape {x.shape}"
            )
        batch_size, seq_len, embed_dim = x.shape
        if seq_len > self.max_seq_len:
            raise ValueError(
                f"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}"
            )
        if embed_dim != self.embed_dim:
            raise ValueError(
                f"Expected embedding dimension {self.embed_dim}, got {embed_dim}"
            )

        # (seq_len, embed_dim) broadcasts against (batch, seq_len, embed_dim)
        positions = self.position_embeddings[:seq_len]
        return x + positions

    def __call__(self, x: Tensor) -> Tensor:
        return self.forward(x)

    def parameters(self) -> List[Tensor]:
        return [self.position_embeddings]

    def __repr__(self) -> str:
        return f"PositionalEncoding(max_seq_len={self.max_seq_len}, embed_dim={self.embed_dim})"
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-positional", "locked": true, "points": 10}
def test_unit_positional_encoding():
    """🔬 Unit test for the learned positional encoding."""
    print("🔬 Unit Test: PositionalEncoding...")

    pe = PositionalEncoding(max_seq_len=32, embed_dim=8)
    x = Tensor(np.zeros((2, 5, 8)))
    y = pe.forward(x)
    assert y.shape == (2, 5, 8), f"Expected (2, 5, 8), got {y.shape}"

    # zero input: the output is the position table itself, identical for each batch element
    assert np.allclose(y.data[0], y.data[1]), "Every sequence must get the same positions"
    assert np.allclose(y.data[0], pe.position_embeddings.data[:5]), "Rows 0..4 should be added"

    assert len(pe.parameters()) == 1, "PositionalEncoding has one parameter tensor"

    try:
        pe.forward(Tensor(np.zeros((5, 8))))
        raised = False
    except ValueError:
        raised = True
    assert raised, "A 2-D input should raise ValueError"

    print("✅ PositionalEncoding passed!")

if __name__ == "__main__":
    test_unit_positional_encoding()

# %% [markdown]
"""
## 3. Sinusoidal positional encoding

The original Transformer used a fixed table instead of a learned one. Column pairs
`(2i, 2i+1)` hold a sine and a cosine of the same frequency:

```
PE[pos, 2i]   = sin(pos / 10000^(2i / D))
PE[pos, 2i+1] = cos(pos / 10000^(2i / D))
```

Low column pairs oscillate quickly, high ones slowly, so every position gets a
distinct fingerprint, and because `sin`/`cos` of a shifted angle is a rotation of
the unshifted pair, relative offsets are easy for attention to pick up. No
parameters, and it works for any length you care to compute.

Sanity check: at `pos = 0` every sine is 0 and every cosine is 1, so row 0 is
`[0, 1, 0, 1, ...]`.
"""

# %% nbgrader={"grade": false, "grade_id": "sinusoidal-function", "solution": true}
#| export
def create_sinusoidal_embeddings(max_seq_len: int, embed_dim: int) -> Tensor:
    """
    Fixed sine/cosine position table from "Attention Is All You Need".

    TODO: Return a (max_seq_len, embed_dim) float32 Tensor with
        PE[pos, 2i]   = sin(pos / 10000^(2i / embed_dim))
        PE[pos, 2i+1] = cos(pos / 10000^(2i / embed_dim))

    HINTS:
    - Build the angles as (positions column) * (frequencies row).
    - An odd embed_dim has one more sine column than cosine columns.
    - The table is fixed: it should not require gradients.
    """
    ### BEGIN SOLUTION
    positions = np.arange(max_seq_len, dtype=np.float64)[:, np.newaxis]   # (L, 1)
    even_cols = np.arange(0, embed_dim, 2, dtype=np.float64)              # the 2i values
    inv_freq = np.exp(-math.log(10000.0) * even_cols / embed_dim)         # 1 / 10000^(2i/D)
    angles = positions * inv_freq                                         # (L, ceil(D/2))

    table = np.zeros((max_seq_len, embed_dim), dtype=np.float32)
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : embed_dim // 2])
    return Tensor(table)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-sinusoidal", "locked": true, "points": 10}
def test_unit_sinusoidal_embeddings():
    """🔬 Unit test for the sinusoidal table."""
    print("🔬 Unit Test: Sinusoidal embeddings...")

    table = create_sinusoidal_embeddings(max_seq_len=20, embed_dim=6)
    assert table.shape == (20, 6), f"Expected (20, 6), got {table.shape}"
    assert np.allclose(table.data[0], [0, 1, 0, 1, 0, 1]), "Row 0 must be [0, 1, 0, 1, ...]"
    assert np.all(np.abs(table.data) <= 1.0 + 1e-6), "sin/cos values lie in [-1, 1]"
    assert not np.allclose(table.data[1], table.data[2]), "Positions must differ"

    odd = create_sinusoidal_embeddings(max_seq_len=10, embed_dim=5)
    assert odd.shape == (10, 5), "An odd embed_dim must work too"

    print("✅ Sinusoidal embeddings passed!")

if __name__ == "__main__":
    test_unit_sinusoidal_embeddings()

# %%
# %matplotlib inline

def plot_sinusoidal_table(max_seq_len: int = 64, embed_dim: int = 32):
    """Show the sinusoidal table as a heat map (purely visual, not graded)."""
    import matplotlib.pyplot as plt

    table = create_sinusoidal_embeddings(max_seq_len, embed_dim).data
    plt.figure(figsize=(8, 4))
    plt.imshow(table, aspect="auto", cmap="RdBu")
    plt.xlabel("embedding column")
    plt.ylabel("position")
    plt.colorbar()
    plt.title("Sinusoidal positional encoding")
    plt.show()

if __name__ == "__main__":
    plot_sinusoidal_table()

# %% [markdown]
"""
## 4. The complete embedding layer

Real models wrap the pieces in one layer:

```
tokens (batch, seq) --Embedding--> (batch, seq, D) --[x sqrt(D)]--> + positions --> out
```

- `pos_encoding='learned'`: a `PositionalEncoding` (its table is a parameter)
- `pos_encoding='sinusoidal'`: the fixed table (not a parameter)
- `pos_encoding=None`: no position information at all
- `scale_embeddings=True`: multiply the *token* vectors by `sqrt(D)` before adding
  positions, as in the original Transformer, so the position signal does not drown
  out the token signal.

A single unbatched sequence `(seq,)` should come back as `(seq, D)`.
"""

# %% nbgrader={"grade": false, "grade_id": "complete-system", "solution": true}
#| export
class EmbeddingLayer:
    """
    Token embeddings plus (optional) positional information, in one layer.

    TODO: Combine Embedding with a positional scheme chosen by pos_encoding:
    'learned' (PositionalEncoding), 'sinusoidal' (fixed table) or None.

    STEPS:
    1. Any other pos_encoding value is an error (ValueError).
    2. forward(tokens): accept (batch, seq_len) or (seq_len,) ids.
    3. Look the tokens up, multiply by sqrt(embed_dim) if scale_embeddings,
       then add the positions.
    4. A 1-D input gives a (seq_len, embed_dim) output.
    """

    ### BEGIN SOLUTION
    def __init__(self, vocab_size: int, embed_dim: int, max_seq_len: int = 512,
                 pos_encoding: Optional[str] = 'learned', scale_embeddings: bool = False):
        if pos_encoding not in ('learned', 'sinusoidal', None):
            raise ValueError(
                f"pos_encoding must be 'learned', 'sinusoidal' or None, got {pos_encoding!r}"
            )
        self.vocab_size = vocab_size
        self.embed_dim = embed_dim
        self.max_seq_len = max_seq_len
        self.pos_encoding_type = pos_encoding
        self.scale_embeddings = scale_embeddings

        self.token_embedding = Embedding(vocab_size, embed_dim)
        if pos_encoding == 'learned':
            self.pos_encoding = PositionalEncoding(max_seq_len, embed_dim)
        elif pos_encoding == 'sinusoidal':
            self.pos_encoding = create_sinusoidal_embeddings(max_seq_len, embed_dim)
        else:
            self.pos_encoding = None

    def forward(self, tokens: Tensor) -> Tensor:
        unbatched = len(tokens.shape) == 1
        if unbatched:
            # token ids carry no gradient, so rebuilding the Tensor is fine here
            tokens = Tensor(tokens.data[np.newaxis, :])

        h = self.token_embedding.forward(tokens)            # (batch, seq, D)
        if self.scale_embeddings:
            h = h * math.sqrt(self.embed_dim)

        if self.pos_encoding_type == 'learned':
            h = self.pos_encoding.forward(h)
        elif self.pos_encoding_type == 'sinusoidal':
            seq_len = h.shape[1]
            if seq_len > self.max_seq_len:
                raise ValueError(
                    f"Sequence length {seq_len} exceeds max_seq_len={self.max_seq_len}"
                )
            h = h + self.pos_encoding[:seq_len]

        if unbatched:
            h = h[0]
        return h

    def __call__(self, tokens: Tensor) -> Tensor:
        return self.forward(tokens)

    def parameters(self) -> List[Tensor]:
        params = list(self.token_embedding.parameters())
        if self.pos_encoding_type == 'learned':
            params += self.pos_encoding.parameters()
        return params

    def __repr__(self) -> str:
        return (f"EmbeddingLayer(vocab_size={self.vocab_size}, embed_dim={self.embed_dim}, "
                f"pos_encoding={self.pos_encoding_type!r})")
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "test-complete-system", "locked": true, "points": 15}
def test_unit_complete_embedding_system():
    """🔬 Unit test for EmbeddingLayer."""
    print("🔬 Unit Test: EmbeddingLayer...")

    tokens = Tensor([[4, 8, 15], [16, 23, 42]])
    for mode, n_params in [('learned', 2), ('sinusoidal', 1), (None, 1)]:
        layer = EmbeddingLayer(vocab_size=64, embed_dim=12, max_seq_len=16, pos_encoding=mode)
        out = layer(tokens)
        assert out.shape == (2, 3, 12), f"{mode}: expected (2, 3, 12), got {out.shape}"
        assert len(layer.parameters()) == n_params, \
            f"{mode}: expected {n_params} parameter tensors, got {len(layer.parameters())}"

    single = EmbeddingLayer(vocab_size=64, embed_dim=12, max_seq_len=16)(Tensor([1, 2, 3, 4]))
    assert single.shape == (4, 12), f"A 1-D input should give (4, 12), got {single.shape}"

    plain = EmbeddingLayer(vocab_size=64, embed_dim=12, pos_encoding=None)
    scaled = EmbeddingLayer(vocab_size=64, embed_dim=12, pos_encoding=None, scale_embeddings=True)
    scaled.token_embedding.weight = plain.token_embedding.weight
    assert np.allclose(scaled(tokens).data, plain(tokens).data * math.sqrt(12), rtol=1e-5), \
        "scale_embeddings should multiply the token vectors by sqrt(embed_dim)"

    print("✅ EmbeddingLayer passed!")

if __name__ == "__main__":
    test_unit_complete_embedding_system()

# %% [markdown]
"""
## 5. Systems analysis

How big do these tables get, and how fast is a lookup? Run the cells below and
look at how memory grows with `vocab_size x embed_dim`.
"""

# %% nbgrader={"grade": false, "grade_id": "memory-analysis", "solution": true}
def analyze_embedding_memory():
    """📊 Parameter count and float32 memory of some embedding tables."""
    print("📊 Embedding table memory")
    configs = [("tiny", 1_000, 64), ("small", 10_000, 256),
               ("GPT-2", 50_257, 768), ("GPT-3", 50_257, 12_288)]
    print(f"{'model':<8}{'vocab':>10}{'dim':>8}{'params (M)':>14}{'MB':>10}")
    for name, vocab, dim in configs:
        n = vocab * dim
        print(f"{name:<8}{vocab:>10,}{dim:>8}{n / 1e6:>14.1f}{n * BYTES_PER_FLOAT32 / BYTES_PER_MB:>10.1f}")
    print("Learned positions (2048 x 768):",
          f"{2048 * 768 * BYTES_PER_FLOAT32 / BYTES_PER_MB:.1f} MB; sinusoidal: 0 parameters")

if __name__ == "__main__":
    analyze_embedding_memory()

# %% nbgrader={"grade": false, "grade_id": "lookup-performance", "solution": true}
def analyze_embedding_performance():
    """📊 Time lookups for several vocabulary and batch sizes (takes a few seconds)."""
    import time
    print("📊 Embedding lookup speed")
    seq_len, embed_dim, reps = 128, 256, 50
    for vocab in [1_000, 10_000, 100_000]:
        emb = Embedding(vocab, embed_dim)
        for batch in [1, 16, 64]:
            ids = Tensor(np.random.randint(0, vocab, size=(batch, seq_len)))
            emb(ids)  # warm-up
            start = time.perf_counter()
            for _ in range(reps):
                emb(ids)
            elapsed = (time.perf_counter() - start) / reps
            print(f"vocab={vocab:>7,} batch={batch:>3}: {elapsed * 1e3:7.3f} ms "
                  f"({batch * seq_len / elapsed:,.0f} tokens/s)")

if __name__ == "__main__":
    analyze_embedding_performance()

# %% [markdown]
"""
## 🧪 Module integration test

Runs every unit test and then pushes a small batch through a complete layer.
"""

# %% nbgrader={"grade": true, "grade_id": "module-test", "locked": true, "points": 20}
def test_module():
    """🧪 Run all unit tests plus a small end-to-end check."""
    print("🧪 RUNNING MODULE 11 TESTS")
    test_unit_embedding()
    test_unit_positional_encoding()
    test_unit_sinusoidal_embeddings()
    test_unit_complete_embedding_system()

    layer = EmbeddingLayer(vocab_size=100, embed_dim=32, max_seq_len=64,
                           pos_encoding='sinusoidal', scale_embeddings=True)
    ids = Tensor(np.random.randint(0, 100, size=(4, 20)))
    out = layer(ids)
    assert out.shape == (4, 20, 32)
    assert np.all(np.isfinite(out.data)), "Output contains NaN or inf"
    print("🎉 All module 11 tests passed!")

if __name__ == "__main__":
    test_module()

# %% [markdown]
"""
## 🤔 Reflection questions

1. A vocabulary of 50,000 tokens with `embed_dim = 1024`: how many megabytes does the
   float32 table take? How much does the optimizer state (Adam: two more copies) add?
2. Why must the backward pass *add* gradients for repeated token ids rather than
   overwrite them? What would training look like if it overwrote?
3. Your learned `PositionalEncoding` was trained with `max_seq_len = 512`. What happens
   at inference time with a 600-token prompt, and how does the sinusoidal table differ?
"""

# %% [markdown]
"""
## 🎯 Summary

You built the input stage of every transformer:
- `Embedding`: Xavier-initialised lookup table with range checks and gradients
- `PositionalEncoding`: learned, per-position vectors shared across the batch
- `create_sinusoidal_embeddings`: parameter-free positions
- `EmbeddingLayer`: everything combined, with optional `sqrt(D)` scaling

Next up, Module 12: attention. Export your work with `tito module complete 11`.
"""
