"""Rubric loading: the bundled rubric, and clear errors for broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.errors import RubricError
from grader.rubric import load_rubric

from .conftest import EMBEDDINGS_RUBRIC


def test_the_bundled_rubric_loads_with_100_points() -> None:
    """With no module named, the suite's standing default (module 11); its own tests hold its check ids."""
    rubric = load_rubric()
    assert rubric.module == "embeddings" and rubric.max_score == 100


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("schema_version = 0\n", "older than this grader", id="too-old"),
        pytest.param("title = 'x'\n", "missing integer schema_version", id="no-version"),
        pytest.param("schema_version = 1\n[[checks\n", "not valid TOML", id="bad-toml"),
        pytest.param("schema_version = 1\nid='r'\ntitle='t'\nmodule='nope'\n", "no course module 'nope' is installed",
                     id="no-module"),
    ],
)
def test_broken_rubrics_say_what_to_fix(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(text)
    with pytest.raises(RubricError, match=message):
        load_rubric(path)


def test_unknown_probe_and_bad_visibility_are_caught(tmp_path: Path) -> None:
    base = EMBEDDINGS_RUBRIC.read_text()
    path = tmp_path / "r.toml"
    path.write_text(base.replace('id = "emb_shape"', 'id = "emb_shape"\nprobe = "nope"'))
    with pytest.raises(RubricError, match="unknown probe 'nope'"):
        load_rubric(path)
    path.write_text(base.replace('visibility = "hidden"', 'visibility = "secret"'))
    with pytest.raises(RubricError, match="visibility"):
        load_rubric(path)


def test_instructors_can_reweight(tmp_path: Path) -> None:
    base = EMBEDDINGS_RUBRIC.read_text()
    path = tmp_path / "r.toml"
    path.write_text(base.replace("points = 8", "points = 18", 1))
    assert load_rubric(path).max_score == 110


@pytest.mark.parametrize(("old", "new", "message"), [
    ('comparator = "xavier_bounds"', 'comparator = "xavier_bound"',
     "check 'emb_xavier' names unknown comparator 'xavier_bound'"),
    ('comparator = "xavier_bounds"', 'comparator = "xavier_bounds"\ndiagnosis = "emb_lookupp"',
     "check 'emb_xavier' names unknown diagnosis 'emb_lookupp'"),
])
def test_a_typo_in_a_comparator_or_diagnosis_name_is_an_error_naming_the_check(
        tmp_path: Path, old: str, new: str, message: str) -> None:
    import re

    text = EMBEDDINGS_RUBRIC.read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "typo.toml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(RubricError, match=re.escape(message)):
        load_rubric(path)


def test_every_scored_check_says_where_each_generation_asks_for_it() -> None:
    """The rule of fair points: a point is taken only for what the student was asked (docs/RUBRIC.md)."""
    rubric = load_rubric()
    assert rubric.generations == ("older", "newer") and rubric.score_unasked is False
    for check in rubric.checks:
        for generation in rubric.generations:
            source = check.source(generation)
            assert source, (check.id, generation)
        if check.points > 0:
            assert any(not check.source(g, None).startswith(("not asked", "does not apply"))  # type: ignore[union-attr]
                       for g in rubric.generations), check.id


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        pytest.param('  "newer: test_unit_embedding; Embedding.forward docstring', '  "later: x", "newer: x',
                     "is not 'generation: source'", id="unknown-generation"),
        pytest.param('  "older: test_unit_embedding (1-D and 2-D shapes); tests/11_embeddings/test_embeddings_core.py '
                     '(embed(tokens) on a batch)",\n', "",
                     "does not say where the older generation asks for it", id="no-source"),
        pytest.param('points = 0  # not asked', 'points = 2  # not asked', "no generation asks for it",
                     id="points-for-nothing-asked"),
        pytest.param('about = "the reference also returns shape (0, embed_dim) for an empty id array"', "",
                     "say what the reference does there", id="no-note-text"),
    ],
)
def test_a_scored_check_without_its_source_does_not_load(tmp_path: Path, old: str, new: str, message: str) -> None:
    base = EMBEDDINGS_RUBRIC.read_text()
    assert old in base
    path = tmp_path / "r.toml"
    path.write_text(base.replace(old, new, 1))
    with pytest.raises(RubricError, match=message):
        load_rubric(path)
