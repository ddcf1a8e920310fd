"""TinyTorch module 12, Attention: the grader's own course-module unit.

Both course generations are graded with one rubric: the older (MLSysBook/TinyTorch, one
`scaled_dot_product_attention` body with an additive -1e9 mask) and the newer (cs249r_book, the
same function composed from given helpers, a -inf `masked_fill` mask, `_split_heads` /
`_merge_heads`). Both ask for `(output, attention_weights)`, a 1 = allow / 0 = block mask and a
`MultiHeadAttention(embed_dim, num_heads)` of four `Linear` layers. See rubric.toml.
"""

from grader.unit import ModuleUnit

# Its golden and bug notebooks (examples/) and reviewed equivalent mutants (mutants/) are staff
# only (ModuleUnit.staff_only): the student package leaves them out and no sandbox sees them.
UNIT = ModuleUnit(name="attention", package=__name__, number=12, runtime="tinytorch", runtime_version="1.2",
                  examples="examples", equivalents="mutants/equivalent.toml")
