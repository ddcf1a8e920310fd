"""A table kept transposed, (embed_dim, rows) instead of (rows, embed_dim): read from what the probe
could not do with it (no parameter of the shape to load a known table into) or from an output the
channel refused for its shape, so that every check it breaks names the one cause."""

from __future__ import annotations

import re
from typing import Any

from grader.unit import Cause, CheckOutput, Diagnosis

Inputs = dict[str, Any]

# grader.harness.probes.common.inject: "<what>.parameters() has no tensor of shape (a, b) (found [...])"
_NO_TENSOR = re.compile(r"^(?P<owner>\w+)(?:\([\d, ]*\))?\.parameters\(\) has no tensor of shape "
                        r"\((?P<a>\d+), (?P<b>\d+)\) \(found \[(?P<found>[^\]]*)\]\)$")
# grader.channel: an array of the wrong shape
_REFUSED = re.compile(r"^shape \((?P<b>\d+), (?P<a>\d+)\) differs from the expected \((?P=a), (?P=b)\)$")


def _cause(a: int, b: int, owner: str, i: Inputs) -> str | None:
    """The cause for a parameter of shape (b, a) where (a, b) was wanted."""
    if a == b:
        return None
    if a == i.get("vocab") or owner == "Embedding":
        return (f"the embedding table is stored transposed, as (embed_dim, vocab_size) = ({b}, {a}): the course's "
                f"layout is (vocab_size, embed_dim) = ({a}, {b}), one row per token, so that weight[ids] picks the "
                "rows and the gradient has the table's shape")
    if a == i.get("max_len") or owner == "PositionalEncoding":
        return (f"the position table is stored transposed, as (embed_dim, max_seq_len) = ({b}, {a}): the course's "
                f"layout is (max_seq_len, embed_dim) = ({a}, {b}), one row per position")
    return f"a parameter table is stored transposed, as ({b}, {a}) instead of ({a}, {b}): one row per token or position"


MISSING_POSITIONS = ("parameters() has no (max_seq_len, embed_dim) position table in the 'learned' mode: it must "
                     "return the token weights and the PositionalEncoding's table, which an optimizer then trains")


def _from_text(text: str, i: Inputs) -> str | None:
    found = _NO_TENSOR.match(text)
    if found and f"({found['b']}, {found['a']})" in found["found"]:
        return _cause(int(found["a"]), int(found["b"]), found["owner"], i)
    if (found and found["owner"] == "EmbeddingLayer" and (int(found["a"]), int(found["b"])) == (i.get("max_len"), i.get("dim"))
            and found["found"].count("(") == 1):
        return MISSING_POSITIONS
    refused = _REFUSED.match(text)
    return _cause(int(refused["a"]), int(refused["b"]), "", i) if refused else None


def error_cause(got: CheckOutput, i: Inputs) -> str | None:
    """A probe that raised because a table it loads values into is transposed."""
    if got.error is None or got.error.type != "ProbeError":
        return None
    return _from_text(got.error.message.strip(), i)


def transposed(got: CheckOutput, i: Inputs) -> str | None:
    """An output refused for a transposed shape, or a probe step that found only a transposed table."""
    for text in [*got.rejected.values(), *(v for v in got.facts.values() if isinstance(v, str))]:
        cause = _from_text(text, i)
        if cause:
            return cause
    return None


def first(diagnose: Diagnosis) -> Diagnosis:
    """``diagnose``, after the transposed-table cause (which explains any other difference)."""

    def checked(got: CheckOutput, exp: CheckOutput, i: Inputs) -> str | Cause | None:
        return transposed(got, i) or diagnose(got, exp, i)

    checked.__name__ = getattr(diagnose, "__name__", "diagnosis")
    return checked

