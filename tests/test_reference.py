"""The reference oracle: expected outputs from the trusted worker, cached by what they depend on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from grader import modules
from grader.errors import HarnessProtocolError
from grader.modules import ModuleUnit
from grader.paths import expected_cache_dir
from grader.plan import Job, plan
from grader.reference import ReferenceOracle
from grader.rubric import Rubric, load_rubric

REFERENCE = modules.get("embeddings").reference_path
BROKEN_FORWARD = '''

def _broken(self, *args, **kwargs):
    raise RuntimeError("broken reference")


Embedding.forward = _broken
Embedding.__call__ = _broken
'''


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))


@pytest.fixture()
def oracle() -> Iterator[ReferenceOracle]:
    oracle = ReferenceOracle("embeddings")
    yield oracle
    oracle.close()


def oracle_on(source: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> ReferenceOracle:
    """An oracle whose reference solution is ``source`` (close it after use)."""
    folder.mkdir()
    (folder / "solution.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(ModuleUnit, "reference_path", property(lambda self: folder / "solution.py"))
    return ReferenceOracle("embeddings")


def visible_job(rubric: Rubric, seed: int, count: int = 3) -> Job:
    return plan(rubric, rubric.select(public_only=True)[:count], seed)


def cached_jobs() -> int:
    return len([p for p in expected_cache_dir().iterdir() if not p.name.startswith(".")])


def test_expected_outputs_are_the_reference_solutions(rubric: Rubric, oracle: ReferenceOracle) -> None:
    job = plan(rubric, tuple(c for c in rubric.checks if c.id == "emb_lookup"), 1)
    expected = oracle.expected(job)
    assert list(expected) == ["emb_lookup"] and expected["emb_lookup"].outcome == "ok"
    # the spec's seed case: Embedding(4, 2) with rows (10v, 10v + 1), forward of ids [2, 0]
    assert expected["emb_lookup"].arrays["seed_rows"].tolist() == [[20, 21], [0, 1]]
    inputs = job.checks[0].decoded()
    assert np.array_equal(expected["emb_lookup"].arrays["rows"], inputs["weight"][inputs["ids"].astype(int)])


def test_the_cache_key_ignores_the_seed(rubric: Rubric, oracle: ReferenceOracle) -> None:
    """Visible checks' inputs do not depend on the seed, so every submission shares one entry."""
    first = oracle.expected(visible_job(rubric, seed=1))
    second = oracle.expected(visible_job(rubric, seed=2))
    assert cached_jobs() == 1
    assert first.keys() == second.keys()
    for check_id, out in first.items():
        assert out.facts == second[check_id].facts
        assert all(np.array_equal(a, second[check_id].arrays[name]) for name, a in out.arrays.items())


def test_other_inputs_are_a_new_cache_entry(rubric: Rubric, oracle: ReferenceOracle) -> None:
    hidden = tuple(c for c in rubric.checks if not c.public)[:1]
    oracle.expected(plan(rubric, hidden, 1))
    oracle.expected(plan(rubric, hidden, 2))
    assert cached_jobs() == 2


def test_a_reference_that_fails_a_check_is_a_grader_fault(rubric: Rubric, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    broken = oracle_on(REFERENCE.read_text(encoding="utf-8") + BROKEN_FORWARD,
                       tmp_path / "broken", monkeypatch)
    try:
        with pytest.raises(HarnessProtocolError, match=r"the reference solution failed check 'emb_shape' \(error\): "
                                                         r"RuntimeError: broken reference"):
            broken.expected(visible_job(rubric, seed=1))
    finally:
        broken.close()
    assert cached_jobs() == 0  # nothing is cached from a failed run


def test_a_reference_that_does_not_import_is_a_grader_fault_that_says_why(rubric: Rubric, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    broken = oracle_on('raise RuntimeError("no such course module")\n', tmp_path / "broken", monkeypatch)
    try:
        with pytest.raises(HarnessProtocolError, match=r"does not import.*no such course module"):
            broken.expected(visible_job(rubric, seed=1))
    finally:
        broken.close()


def test_a_changed_reference_never_reads_the_old_ones_cache(rubric: Rubric, oracle: ReferenceOracle, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    job = visible_job(rubric, seed=1)
    oracle.expected(job)
    edited = oracle_on(REFERENCE.read_text(encoding="utf-8") + BROKEN_FORWARD,
                       tmp_path / "edited", monkeypatch)
    try:
        with pytest.raises(HarnessProtocolError):
            edited.expected(job)
    finally:
        edited.close()
