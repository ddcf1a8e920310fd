"""What an exception that a valid module-11 call raised means, read from numpy's message and the
check's inputs: a whole position table where seq_len rows belong, the batch size taken for
seq_len, one cos column too many for an odd embed_dim, a numpy array where a Tensor belongs."""

from __future__ import annotations

from typing import Any

from grader.unit import shapes

Inputs = dict[str, Any]
NOT_A_TENSOR = ("a numpy array was used where a Tensor belongs (an ndarray's .data is a raw memoryview, not its "
                "values)")


def meaning(kind: str, message: str, i: Inputs) -> str | None:
    if "memoryview" in message:
        return NOT_A_TENSOR
    found = shapes(message)
    if found is None:
        return None
    a, b, how = found
    if how == "into" and len(a) == len(b) == 2 and a[0] == b[0] and a[1] == b[1] + 1:
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
