"""What an exception that a valid module-11 call raised means, read from numpy's message and the
check's inputs: a whole position table where seq_len rows belong, the batch size taken for
seq_len, one cos column too many for an odd embed_dim, a numpy array where a Tensor belongs."""

from __future__ import annotations

import re
from typing import Any

from grader.unit import shapes

Inputs = dict[str, Any]
NOT_A_TENSOR = ("a numpy array was used where a Tensor belongs (an ndarray's .data is a raw memoryview, not its "
                "values)")


def meaning(kind: str, message: str, i: Inputs) -> str | None:
    if "memoryview" in message:
        return NOT_A_TENSOR
    if "truth value of an array with more than one element is ambiguous" in message:
        return ("`if`, `and` or `or` was given a whole array, not one True/False: a comparison of ids gives one "
                "bool per id (and a loop over 2-D ids gives whole rows), so test them all with np.any(...)")
    if message.strip() == "array is not broadcastable to correct shape":  # numpy's ufunc.at (np.add.at)
        return ("np.add.at (a ufunc's .at) was given values whose shape does not line up with the rows it indexes: "
                "with the ids flattened to (N,), reshape the gradient to (N, embed_dim) as well")
    reshaped = re.search(r"cannot reshape array of size (\d+) into shape \((\d+), ?(\d+), ?(\d+)\)", message)
    if reshaped and "max_len" in i and int(reshaped[2]) > 1 and int(reshaped[1]) == int(reshaped[3]) * int(reshaped[4]):
        size, batch, seq, dim = (int(g) for g in reshaped.groups())
        return (f"{size} values (one sequence: {seq} x {dim}) cannot be reshaped to a batch of {batch}: the position "
                f"rows are shared by every sequence, so reshape them to (1, {seq}, {dim}) (or leave them (seq_len, "
                "embed_dim)) and let broadcasting add them to each batch element")
    found = shapes(message)
    if found is None:
        return None
    a, b, how = found
    dims = [int(d) for d in i.get("dims", [i["dim"]] if "dim" in i else [])]
    if how == "into" and len(a) == len(b) == 2 and a[0] == b[0] and a[1] + 1 == b[1] and any(
            d % 2 == 0 and d // 2 == b[1] for d in dims) and not any(d % 2 and (d + 1) // 2 == b[1] for d in dims):
        return (f"{a[1]} columns were written into {b[1]}: for an even embed_dim the sin and the cos columns are "
                "D // 2 each and share the same D // 2 frequencies, so give each of them every angle "
                "(angles[:, :embed_dim // 2], not a slice that drops one)")
    if how == "into" and len(a) == len(b) == 2 and a[0] == b[0] and a[1] + 1 == b[1] and dims and not any(
            d % 2 and (d + 1) // 2 == b[1] for d in dims):
        return None
    if how == "into" and len(a) == len(b) == 2 and a[0] == b[0] and a[1] == b[1] + 1 and (
            not dims or any(d % 2 and d // 2 == b[1] for d in dims)):
        return (f"{a[1]} columns were written into {b[1]}: for an odd embed_dim there is one cos column fewer "
                "than sin columns (D // 2 of them), so take angles[:, :embed_dim // 2] for the cos columns")
    if how == "into" and len(a) == len(b) == 2 and a[0] == b[0] and a[1] + 1 == b[1]:
        return (f"{a[1]} columns were written into {b[1]}: for an odd embed_dim there is one sin column more than "
                "cos columns ((D + 1) // 2 of them, PE[:, 0::2]), so the sines take every frequency")
    big, small = (a, b) if len(a) >= len(b) else (b, a)
    if how != "operands" or len(big) != 3 or len(small) < 2 or big[-1] != small[-1]:
        return None
    batch, seq, rows = big[0], big[1], small[-2]
    if rows == i.get("vocab") and rows != i.get("max_len") and rows != seq:
        return (f"the position table has vocab_size ({rows}) rows: it is built for max_seq_len positions, "
                "create_sinusoidal_embeddings(max_seq_len, embed_dim)")
    if rows == i.get("max_len") and rows != seq:
        return (f"the whole position table ({rows} rows, max_seq_len) was added to a sequence of {seq}: add only "
                "the rows of these positions, table[:seq_len] (from start_pos on, where there is one)")
    if rows == batch and rows != seq:
        return (f"the {rows} position rows added are as many as the batch, not the sequence ({seq}): x is (batch, "
                "seq_len, embed_dim), so seq_len is x.shape[1] (is the shape unpacked in the wrong order?)")
    return None
