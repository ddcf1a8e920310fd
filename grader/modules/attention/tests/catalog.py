"""Bug and style notebooks for the module-12 checks: a correct notebook of ours with one edit.

Each entry names its base notebook in ``examples/`` (staff only), the edits (old text -> new text,
each found exactly once in the base's code cells) and, for a bug, the checks that must fail and a
piece of the likely cause the first of them must give. ``python -m
grader.modules.attention.tests.catalog`` rewrites the notebooks; ``test_attention.py`` grades them
and checks that they are in sync.
"""

from __future__ import annotations

from pathlib import Path

import grader.unittesting as unittesting

FOLDER = Path(__file__).resolve().parents[1] / "examples"
OLDER, NEWER = "correct_older.ipynb", "correct_newer.ipynb"


class Style(unittesting.Style):
    """A correct notebook written unusually: full marks."""

    folder = FOLDER


class Bug(unittesting.Bug):
    folder = FOLDER


MHA_DOWNSTREAM = ("mha_values_visible", "mha_values", "mha_mask", "mha_grad")


def _qkv(q: str, k: str, v: str) -> str:
    """The older base's three projection lines, each from the given expression."""
    return "".join(f"        {name} = {source}.reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
                   for name, source in (("q", q), ("k", k), ("v", v)))


QKV = _qkv("self.q_proj.forward(x)", "self.k_proj.forward(x)", "self.v_proj.forward(x)")


NAIVE_SOFTMAX = (
    "class NaiveSoftmax(Function):\n"
    "    def forward(self, a):\n"
    "        e = np.exp(a)\n"
    "        self.out = e / np.sum(e, axis=-1, keepdims=True)\n"
    "        return self.out\n\n"
    "    def backward(self, grad):\n"
    "        s = self.out\n"
    "        return (s * (grad - np.sum(grad * s, axis=-1, keepdims=True)),)\n\n\n"
    "def scaled_dot_product_attention(")

BUGS: tuple[Bug, ...] = (
    Bug("bug_naive_softmax_overflow", OLDER,
        (("from tinytorch.core.activations import Softmax\n",
          "from tinytorch.core.activations import Softmax\nfrom tinytorch.core.autograd import Function\n"),
         ("def scaled_dot_product_attention(", NAIVE_SOFTMAX),
         ("    weights = Softmax()(scores, dim=-1)\n", "    weights = NaiveSoftmax.apply(scores)\n")),
        ("sdpa_values",), "the softmax overflows on large scores",
        "A softmax of the student's own (a Function with its backward) that exponentiates the scores without "
        "subtracting their maximum first: right on small scores, NaN once a score passes about 88."),
    Bug("bug_naive_softmax_overflow_newer", NEWER,
        (("from tinytorch.core.activations import Softmax\n",
          "from tinytorch.core.activations import Softmax\nfrom tinytorch.core.tensor import Function\n"),
         ("def scaled_dot_product_attention(", NAIVE_SOFTMAX),
         ("    weights = Softmax()(scores, dim=-1)\n", "    weights = NaiveSoftmax.apply(scores)\n")),
        ("sdpa_values", "sdpa_mask_refusal"), "the softmax overflows on large scores",
        "Newer generation: the same softmax without the maximum subtracted; it also turns the contract test's "
        "scores of 1e10 into NaN."),
    Bug("bug_no_scale", OLDER,
        (("    scores = scores * (1.0 / math.sqrt(d_k))\n", ""),),
        ("sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "the scores were not scaled",
        "The scores Q K^T are never multiplied by 1/sqrt(d_k)."),
    Bug("bug_scale_by_dk", NEWER,
        (("    return scores * (1.0 / math.sqrt(d_k))\n", "    return scores * (1.0 / d_k)\n"),),
        ("sdpa_values", "sdpa_heads", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "divided by d_k",
        "Newer generation: _scale_scores divides by d_k instead of sqrt(d_k)."),
    Bug("bug_dk_from_axis1", NEWER,
        (("    scores = _scale_scores(_compute_attention_scores(Q, K), Q.shape[-1])\n",
          "    scores = _scale_scores(_compute_attention_scores(Q, K), Q.shape[1])\n"),),
        ("sdpa_values", "sdpa_heads", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "the sequence length",
        "Newer generation: d_k is read from Q.shape[1], which is the sequence length for (batch, seq, d) inputs and "
        "the number of heads for (batch, heads, seq, head_dim) ones."),
    Bug("bug_dk_from_axis2", OLDER,
        (("    d_k = Q.shape[-1]\n", "    d_k = Q.shape[2]\n"),),
        MHA_DOWNSTREAM, "gives wrong values on its (batch, heads, seq, head_dim) inputs",
        "Older generation: d_k is read from Q.shape[2], right for (batch, seq, d) inputs, the sequence length for "
        "the (batch, heads, seq, head_dim) ones MultiHeadAttention passes."),
    Bug("bug_scale_multiplied", OLDER,
        (("    scores = scores * (1.0 / math.sqrt(d_k))\n", "    scores = scores * math.sqrt(d_k)\n"),),
        ("sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "multiplied by sqrt(d_k)",
        "The scores are multiplied by sqrt(d_k) instead of divided by it."),
    Bug("bug_mask_positive_penalty", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n", "        penalty = (1.0 - mask.data) * -MASK_VALUE\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "the penalty has the wrong sign",
        "The penalty is +1e9 where the mask is 0, so the blocked keys get all the weight."),
    Bug("bug_mask_times_neg_inf", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n", "        penalty = (1.0 - mask.data) * -np.inf\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "0 * -inf = NaN",
        "The penalty is (1 - mask) * -inf, which is NaN (0 * -inf) on every allowed key."),
    Bug("bug_mask_first_entry", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n", "        penalty = (1.0 - mask.data[0]) * MASK_VALUE\n"),),
        ("sdpa_mask", "mha_mask"), "the first one's mask",
        "Every batch entry is masked with the first entry's mask (mask.data[0])."),
    Bug("bug_weights_are_scores", OLDER,
        (("    return output, weights\n", "    return output, scores\n"),),
        ("sdpa_shapes", "sdpa_values", "sdpa_mask"), "the scores before the softmax",
        "The function returns the scores before the softmax as the attention weights (the output is right)."),
    Bug("bug_mha_mask_no_head_axis", OLDER,
        (("        if mask is not None:\n            mask = Tensor(mask.data.reshape(batch, 1, seq, seq))\n", ""),),
        ("mha_mask",), "reshape the (batch, seq, seq) mask",
        "MultiHeadAttention passes the (batch, seq, seq) mask on without a head axis, so it does not broadcast."),
    Bug("bug_mha_no_bias", OLDER,
        ((QKV, _qkv("x.matmul(self.q_proj.weight)", "x.matmul(self.k_proj.weight)", "x.matmul(self.v_proj.weight)")),),
        MHA_DOWNSTREAM, "ignore their biases",
        "The Q, K and V projections multiply by the weights alone, without adding the biases."),
    Bug("bug_mha_kv_from_q", OLDER,
        ((QKV, _qkv(*["self.q_proj.forward(x)"] * 3)),),
        MHA_DOWNSTREAM, "projected with q_proj",
        "K and V are projected with q_proj as well."),
    Bug("bug_mha_scale_twice", OLDER,
        ((QKV, QKV + "        q = q * (1.0 / math.sqrt(self.head_dim))\n"),),
        MHA_DOWNSTREAM, "scaled twice",
        "MultiHeadAttention scales Q by 1/sqrt(head_dim) before the attention function scales the scores again."),
    Bug("bug_mha_shared_linear", OLDER,
        (("        self.k_proj = Linear(embed_dim, embed_dim)\n        self.v_proj = Linear(embed_dim, embed_dim)\n",
          "        self.k_proj = self.q_proj\n        self.v_proj = self.q_proj\n"),),
        ("mha_config", *MHA_DOWNSTREAM), "the same tensor twice",
        "k_proj and v_proj are the very Linear q_proj is, so Q, K and V share one projection."),
    Bug("bug_softmax_queries", OLDER,
        (("    weights = Softmax()(scores, dim=-1)\n", "    weights = Softmax()(scores, dim=-2)\n"),),
        ("sdpa_shapes", "sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM),
        "the rows of the attention weights do not sum to 1",
        "The softmax normalises over the queries (axis -2) instead of the keys."),
    Bug("bug_mha_mask_dropped", OLDER,
        (("        attended, _ = scaled_dot_product_attention(q, k, v, mask)\n",
          "        attended, _ = scaled_dot_product_attention(q, k, v)\n"),),
        ("mha_mask",), "the mask had no effect",
        "MultiHeadAttention reshapes the mask but never passes it to the attention function."),
    Bug("bug_mask_inverted", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n", "        penalty = mask.data * MASK_VALUE\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "read the wrong way round",
        "The -1e9 penalty goes where the mask is 1 (allowed) instead of where it is 0."),
    Bug("bug_mask_inverted_fill", NEWER,
        (("        scores = _apply_mask(scores, mask)\n",
          "        scores = scores.masked_fill(mask.data == 1, MASK_VALUE)\n"),),
        ("sdpa_mask", "sdpa_mask_refusal", "sdpa_grad", "mha_mask"), "read the wrong way round",
        "Newer generation: the attention masks inline with masked_fill where mask == 1 (instead of 0), with -inf: "
        "a query whose keys are all allowed has them all blocked, and its weights are NaN."),
    Bug("bug_params_no_out_proj", OLDER,
        (("        for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):\n",
          "        for layer in (self.q_proj, self.k_proj, self.v_proj):\n"),),
        ("mha_config",), "parameters() leaves out out_proj.weight, out_proj.bias",
        "parameters() forgets out_proj: 6 tensors instead of 8."),
    Bug("bug_params_weights_then_biases", NEWER,
        (("        return [p for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj) for p in "
          "layer.parameters()]\n",
          "        layers = (self.q_proj, self.k_proj, self.v_proj, self.out_proj)\n"
          "        return [layer.weight for layer in layers] + [layer.bias for layer in layers]\n"),),
        ("mha_config",), "in another order",
        "Newer generation: parameters() lists the four weights, then the four biases, not each layer's weight and "
        "bias in turn as its EXAMPLE shows."),
    Bug("bug_mask_tiny_penalty", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n", "        penalty = (1.0 - mask.data) * -1e-9\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "a penalty as small as -1e-9 changes nothing",
        "A typo: the penalty is -1e-9 instead of -1e9, too small to change a float32 score."),
    Bug("bug_call_drops_mask", OLDER,
        (("        return self.forward(x, mask)\n", "        return self.forward(x)\n"),),
        ("mha_mask",), "__call__ must pass the mask on",
        "__call__ calls forward without the mask; forward itself masks right."),
    Bug("bug_transpose_batch_axis", OLDER,
        ((QKV, QKV.replace(".transpose(1, 2)", ".transpose(0, 2)")),
         ("        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n",
          "        merged = attended.transpose(0, 2).reshape(batch, seq, self.embed_dim)\n")),
        ("mha_values_visible", "mha_shapes", "mha_values", "mha_mask", "mha_grad"), "with transpose(0, 2)",
        "The heads are split and merged with transpose(0, 2), which swaps the batch and head axes: each head attends "
        "across the batch (and the mask no longer broadcasts)."),
    Bug("bug_split_reshape_only", OLDER,
        ((QKV, "".join(f"        {n} = self.{n}_proj.forward(x).reshape(batch, self.num_heads, seq, self.head_dim)\n"
                       for n in "qkv")),),
        MHA_DOWNSTREAM, "straight to (batch, heads, seq, head_dim) (the merge is right)",
        "The heads are split by a reshape straight to (batch, heads, seq, head_dim), without the transpose; the merge "
        "is right."),
    Bug("bug_v_from_k_proj", OLDER,
        ((QKV, _qkv("self.q_proj.forward(x)", "self.k_proj.forward(x)", "self.k_proj.forward(x)")),),
        MHA_DOWNSTREAM, "V was projected with k_proj",
        "A copy-paste slip: V is projected with k_proj."),
    Bug("bug_k_v_swapped", OLDER,
        ((QKV, _qkv("self.q_proj.forward(x)", "self.v_proj.forward(x)", "self.k_proj.forward(x)")),),
        MHA_DOWNSTREAM, "K and V were swapped",
        "K comes from v_proj and V from k_proj."),
    Bug("bug_out_proj_no_bias", OLDER,
        (("        return self.out_proj.forward(merged)\n", "        return merged.matmul(self.out_proj.weight)\n"),),
        MHA_DOWNSTREAM, "the output projection leaves out its bias",
        "The output projection multiplies by out_proj's weight alone, without its bias."),
    Bug("bug_kqt", OLDER,
        (("    scores = Q.matmul(K.transpose(-2, -1))\n", "    scores = K.matmul(Q.transpose(-2, -1))\n"),),
        ("sdpa_shapes", "sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "not K @ Q^T",
        "The scores are K Q^T instead of Q K^T."),
    Bug("bug_always_causal", OLDER,
        (("    if mask is not None:\n        penalty = (1.0 - mask.data) * MASK_VALUE\n"
          "        scores = scores + Tensor(penalty)\n",
          "    allowed = np.tril(np.ones((Q.shape[-2], K.shape[-2])))\n"
          "    if mask is not None:\n        allowed = allowed * mask.data\n"
          "    scores = scores + Tensor((1.0 - allowed) * MASK_VALUE)\n"),),
        ("sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "a causal mask was applied though none was given",
        "A causal mask is always applied, on top of the mask given and without one."),
    Bug("bug_softmax_backward_diagonal", OLDER,
        (("from tinytorch.core.activations import Softmax\n",
          "from tinytorch.core.activations import Softmax\nfrom tinytorch.core.autograd import Function\n"),
         ("def scaled_dot_product_attention(",
          "class RowSoftmax(Function):\n"
          "    def forward(self, a):\n"
          "        e = np.exp(a - np.max(a, axis=-1, keepdims=True))\n"
          "        self.out = e / np.sum(e, axis=-1, keepdims=True)\n"
          "        return self.out\n\n"
          "    def backward(self, grad):\n"
          "        return (grad * self.out * (1 - self.out),)\n\n\n"
          "def scaled_dot_product_attention("),
         ("    weights = Softmax()(scores, dim=-1)\n", "    weights = RowSoftmax.apply(scores)\n")),
        ("sdpa_grad", "mha_grad"), "a backward rule is wrong",
        "A softmax of the student's own whose backward keeps only the diagonal of the Jacobian, grad * s * (1 - s)."),
    Bug("bug_scale_on_output", OLDER,
        (("    scores = scores * (1.0 / math.sqrt(d_k))\n", ""),
         ("    output = weights.matmul(V)\n", "    output = weights.matmul(V) * (1.0 / math.sqrt(d_k))\n")),
        ("sdpa_values", "sdpa_mask", "sdpa_grad", *MHA_DOWNSTREAM), "applied to the output instead of the scores",
        "The 1/sqrt(d_k) scale multiplies the output instead of the scores."),
    Bug("bug_mha_returns_pair", OLDER,
        (("        attended, _ = scaled_dot_product_attention(q, k, v, mask)\n",
          "        attended, weights = scaled_dot_product_attention(q, k, v, mask)\n"),
         ("        return self.out_proj.forward(merged)\n", "        return self.out_proj.forward(merged), weights\n")),
        ("mha_shapes", *MHA_DOWNSTREAM), "MultiHeadAttention returns a pair",
        "MultiHeadAttention.forward returns (output, attention_weights) instead of the output alone."),
    Bug("bug_mask_after_softmax", OLDER,
        (("        scores = scores + Tensor(penalty)\n    weights = Softmax()(scores, dim=-1)\n",
          "    weights = Softmax()(scores, dim=-1)\n    if mask is not None:\n        weights = weights * mask\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "after the softmax",
        "The mask multiplies the softmax output instead of blocking the scores before it."),
    Bug("bug_mask_multiplies_scores", OLDER,
        (("        penalty = (1.0 - mask.data) * MASK_VALUE\n        scores = scores + Tensor(penalty)\n",
          "        scores = scores * mask\n"),),
        ("sdpa_mask", "sdpa_grad", "mha_mask"), "multiplied by the mask",
        "The scores are multiplied by the mask, so a blocked score is 0, not a huge negative value."),
    Bug("bug_split_without_transpose", NEWER,
        (("        return x.reshape(batch_size, seq_len, self.num_heads, self.head_dim).transpose(1, 2)\n",
          "        return x.reshape(batch_size, self.num_heads, seq_len, self.head_dim)\n"),
         ("        return x.transpose(1, 2).reshape(batch_size, seq_len, self.embed_dim)\n",
          "        return x.reshape(batch_size, seq_len, self.embed_dim)\n")),
        MHA_DOWNSTREAM, "split with a reshape alone",
        "Newer generation: _split_heads reshapes straight to (batch, heads, seq, head_dim), and _merge_heads undoes "
        "only that reshape."),
    Bug("bug_merge_without_transpose", OLDER,
        (("        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n",
          "        merged = attended.reshape(batch, seq, self.embed_dim)\n"),),
        MHA_DOWNSTREAM, "merged with a reshape alone",
        "The heads are merged by a reshape of (batch, heads, seq, head_dim), without transposing back first."),
    Bug("bug_heads_interleaved", OLDER,
        (("        q = self.q_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
          "        k = self.k_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
          "        v = self.v_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n",
          "        q = self.q_proj.forward(x).reshape(batch, seq, self.head_dim, self.num_heads).transpose((0, 3, 1, 2))\n"
          "        k = self.k_proj.forward(x).reshape(batch, seq, self.head_dim, self.num_heads).transpose((0, 3, 1, 2))\n"
          "        v = self.v_proj.forward(x).reshape(batch, seq, self.head_dim, self.num_heads).transpose((0, 3, 1, 2))\n"),
         ("        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n",
          "        merged = attended.transpose((0, 2, 3, 1)).reshape(batch, seq, self.embed_dim)\n")),
        MHA_DOWNSTREAM, "every num_heads-th column",
        "The projections are split as (batch, seq, head_dim, heads), so each head takes every num_heads-th column."),
    Bug("bug_no_output_projection", OLDER,
        (("        return self.out_proj.forward(merged)\n", "        return merged\n"),),
        MHA_DOWNSTREAM, "output projection was skipped",
        "forward returns the merged heads without passing them through out_proj."),
    Bug("bug_weights_on_data", OLDER,
        (("    weights = Softmax()(scores, dim=-1)\n",
          "    raw = np.exp(scores.data - scores.data.max(axis=-1, keepdims=True))\n"
          "    weights = Tensor(raw / raw.sum(axis=-1, keepdims=True))\n"),),
        ("sdpa_grad", "mha_grad"), "Q and K got no gradient but V did",
        "The softmax is computed with numpy on scores.data and rewrapped, so no gradient reaches Q or K."),
    Bug("bug_merge_on_data", OLDER,
        (("        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n",
          "        merged = Tensor(np.transpose(attended.data, (0, 2, 1, 3)).reshape(batch, seq, self.embed_dim))\n"),),
        ("mha_grad",), "only out_proj got gradients",
        "The heads are merged with numpy on attended.data, which cuts the graph before out_proj."),
    Bug("bug_transpose_heads_axis", OLDER,
        (("    scores = Q.matmul(K.transpose(-2, -1))\n", "    scores = Q.matmul(K.transpose(1, 2))\n"),),
        ("mha_shapes", *MHA_DOWNSTREAM), "(batch, heads, seq, head_dim) inputs",
        "K is transposed on axes 1 and 2: right for 3-D inputs, wrong (seq and heads swapped) for 4-D ones."),
    Bug("bug_fused_qkv_detached", OLDER,
        ((QKV, "        # one fused projection for Q, K and V (one matmul instead of three)\n"
               "        w_qkv = Tensor(np.concatenate([self.q_proj.weight.data, self.k_proj.weight.data,\n"
               "                                       self.v_proj.weight.data], axis=1))\n"
               "        b_qkv = Tensor(np.concatenate([self.q_proj.bias.data, self.k_proj.bias.data,\n"
               "                                       self.v_proj.bias.data]))\n"
               "        qkv = x.matmul(w_qkv) + b_qkv\n"
               "        d = self.embed_dim\n"
               + _qkv("qkv[:, :, 0:d]", "qkv[:, :, d:2 * d]", "qkv[:, :, 2 * d:3 * d]")),),
        ("mha_grad",), "got no gradient though x did",
        "Q, K and V come from one fused weight built by np.concatenate of the three weights' .data: the values "
        "are right, but q_proj, k_proj and v_proj get no gradient (x does)."),
    Bug("bug_out_weight_detached", OLDER,
        (("        return self.out_proj.forward(merged)\n",
          "        return merged.matmul(Tensor(self.out_proj.weight.data)) + self.out_proj.bias\n"),),
        ("mha_grad",), "out_proj.weight got no gradient though x did",
        "The output projection multiplies by a new Tensor of out_proj.weight's .data, so that weight alone gets "
        "no gradient."),
    Bug("bug_pair_swapped", NEWER,
        (("    return weights.matmul(V), weights\n", "    return weights, weights.matmul(V)\n"),),
        ("sdpa_shapes", "sdpa_values", "sdpa_heads", "sdpa_mask", "sdpa_mask_refusal", "sdpa_grad", "mha_shapes",
         *MHA_DOWNSTREAM),
        "the wrong way round",
        "Newer generation: the function returns (attention_weights, output) instead of (output, attention_weights)."),
)

STYLES: tuple[Style, ...] = (
    Style("correct_weights_then_biases", OLDER,
          (("        params = []\n        for layer in (self.q_proj, self.k_proj, self.v_proj, self.out_proj):\n"
            "            params.extend(layer.parameters())\n        return params\n",
            "        layers = (self.q_proj, self.k_proj, self.v_proj, self.out_proj)\n"
            "        return [layer.weight for layer in layers] + [layer.bias for layer in layers]\n"),),
          "Older generation: parameters() lists the four weights, then the four biases (the older course asks only "
          "for the four layers' parameters in one list, 8 of them; only the newer one fixes their order)."),
    Style("correct_own_scale_and_mask", OLDER,
          (("    d_k = Q.shape[-1]\n    scores = Q.matmul(K.transpose(-2, -1))\n"
            "    scores = scores * (1.0 / math.sqrt(d_k))\n"
            "    if mask is not None:\n        penalty = (1.0 - mask.data) * MASK_VALUE\n"
            "        scores = scores + Tensor(penalty)\n",
            "    scores = _scale_scores(Q.matmul(K.transpose(-2, -1)), Q.shape[-1])\n"
            "    scores = _apply_mask(scores, mask)\n"),
           ("def scaled_dot_product_attention(",
            "def _scale_scores(scores: Tensor, d_k: int) -> Tensor:\n"
            "    return scores * (1.0 / math.sqrt(d_k))\n\n\n"
            "def _apply_mask(scores: Tensor, mask: Optional[Tensor]) -> Tensor:\n"
            "    if mask is None:\n"
            "        return scores\n"
            "    return scores + Tensor((1.0 - mask.data) * MASK_VALUE)\n\n\n"
            "def scaled_dot_product_attention(")),
          "Older generation with two helpers of the student's own that share the newer course's names and "
          "parameters, _scale_scores(scores, d_k) and _apply_mask(scores, mask) (additive -1e9, no refusals): names "
          "without the newer given code's behaviour, so only what both generations ask is scored."),
    Style("correct_softmax_backward_node", OLDER,
          (("from tinytorch.core.activations import Softmax\n",
            "from tinytorch.core.activations import Softmax\nfrom tinytorch.core.autograd import SoftmaxBackward\n"),
           ("    weights = Softmax()(scores, dim=-1)\n",
            "    raw = scores.data\n"
            "    e = np.exp(raw - raw.max(axis=-1, keepdims=True))  # stable softmax, explicit\n"
            "    weights = Tensor(e / e.sum(axis=-1, keepdims=True), requires_grad=scores.requires_grad)\n"
            "    if scores.requires_grad:\n"
            "        weights._grad_fn = SoftmaxBackward(scores, weights, dim=-1)\n")),
          "Older generation: an explicit stable softmax in numpy, wired to the backward node the older course's "
          "module 05 gives (tinytorch.core.autograd.SoftmaxBackward)."),
    Style("correct_view_contiguous", NEWER,
          (("            mask = mask.reshape(mask.shape[0], 1, mask.shape[1], mask.shape[2])\n",
            "            mask = mask.view(mask.shape[0], 1, mask.shape[1], mask.shape[2])\n"),
           ("        return x.transpose(1, 2).reshape(batch_size, seq_len, self.embed_dim)\n",
            "        return x.transpose(1, 2).contiguous().view(batch_size, seq_len, self.embed_dim)\n")),
          "Newer generation with the newer Tensor's PyTorch-style methods: the mask's head axis added with "
          "view, and the heads merged with transpose(1, 2).contiguous().view(...)."),
    Style("correct_head_loop", OLDER,
          (("        q = self.q_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
            "        k = self.k_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
            "        v = self.v_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
            "        if mask is not None:\n            mask = Tensor(mask.data.reshape(batch, 1, seq, seq))\n"
            "        attended, _ = scaled_dot_product_attention(q, k, v, mask)\n"
            "        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n"
            "        return self.out_proj.forward(merged)\n",
            "        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)\n"
            "        w_out = self.out_proj.weight\n"
            "        total = None\n"
            "        for h in range(self.num_heads):  # one 3-D attention per head\n"
            "            cols = slice(h * self.head_dim, (h + 1) * self.head_dim)\n"
            "            head, _ = scaled_dot_product_attention(q[:, :, cols], k[:, :, cols], v[:, :, cols], mask)\n"
            "            part = head.matmul(w_out[cols])  # this head's rows of the output projection\n"
            "            total = part if total is None else total + part\n"
            "        return total + self.out_proj.bias\n"),),
          "Older generation, one 3-D attention call per head on column slices, and out_proj applied piecewise "
          "(each head times its rows of the output weight, summed) instead of concatenating the heads."),
    Style("correct_layer_subclass", OLDER,
          (("from tinytorch.core.layers import Linear\n", "from tinytorch.core.layers import Layer, Linear\n"),
           ("    scores = Q.matmul(K.transpose(-2, -1))\n    scores = scores * (1.0 / math.sqrt(d_k))\n",
            "    scores = (Q @ K.transpose()) / math.sqrt(d_k)\n"),
           ("        penalty = (1.0 - mask.data) * MASK_VALUE\n        scores = scores + Tensor(penalty)\n",
            "        scores = scores + Tensor(np.where(mask.data == 0, -np.inf, 0.0))\n"),
           ("class MultiHeadAttention:\n", "class MultiHeadAttention(Layer):\n"),
           ("        ### BEGIN SOLUTION\n        if embed_dim % num_heads != 0:",
            "        ### BEGIN SOLUTION\n        super().__init__()\n        assert embed_dim % num_heads == 0, "
            "'embed_dim must split evenly'\n        if embed_dim % num_heads != 0:"),
           ("            mask = Tensor(mask.data.reshape(batch, 1, seq, seq))\n",
            "            mask = mask.reshape(batch, 1, seq, seq)\n"),
           ("    def __call__(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:\n"
            "        return self.forward(x, mask)\n\n", "")),
          "Older generation on module 03's Layer base class (inherited __call__), the @ operator, K.transpose() "
          "without arguments, division by sqrt(d_k), an additive -inf mask from np.where, mask.reshape, and an "
          "assert for the head check."),
    Style("correct_own_helpers", OLDER,
          (("    if mask is not None:\n        penalty = (1.0 - mask.data) * MASK_VALUE\n"
            "        scores = scores + Tensor(penalty)\n",
            "    scores = _apply_mask(scores, mask)\n"),
           ("def scaled_dot_product_attention(",
            "def _apply_mask(scores: Tensor, mask: Optional[Tensor]) -> Tensor:\n"
            "    \"\"\"Add -1e9 where the mask is 0.\"\"\"\n"
            "    return scores if mask is None else scores + Tensor((1.0 - mask.data) * MASK_VALUE)\n\n\n"
            "def scaled_dot_product_attention("),
           ("        q = self.q_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
            "        k = self.k_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n"
            "        v = self.v_proj.forward(x).reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n",
            "        q, k, v = (self._split_heads(p.forward(x)) for p in (self.q_proj, self.k_proj, self.v_proj))\n"),
           ("        merged = attended.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n",
            "        merged = self._merge_heads(attended)\n"),
           ("    def __call__(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:\n",
            "    def _split_heads(self, t: Tensor) -> Tensor:\n"
            "        batch, seq, _ = t.shape\n"
            "        return t.reshape(batch, seq, self.num_heads, self.head_dim).transpose(1, 2)\n\n"
            "    def _merge_heads(self, t: Tensor) -> Tensor:\n"
            "        batch, _, seq, _ = t.shape\n"
            "        return t.transpose(1, 2).reshape(batch, seq, self.embed_dim)\n\n"
            "    def __call__(self, x: Tensor, mask: Optional[Tensor] = None) -> Tensor:\n")),
          "Older generation with helpers of the student's own that share the newer course's names: an _apply_mask "
          "function (additive -1e9) and _split_heads / _merge_heads methods. It is graded as the older course asks."),
)


def build(entry: Bug | Style) -> str:
    """The entry's notebook as JSON text: its base in FOLDER with its edits."""
    return unittesting.build_notebook(entry)


ENTRIES: tuple[Bug | Style, ...] = (*BUGS, *STYLES)

if __name__ == "__main__":
    for entry in ENTRIES:
        entry.path.write_text(build(entry), encoding="utf-8")
        print(entry.path.name)
