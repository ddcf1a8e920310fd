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
from grader.reference import ReferenceOracle, Spawner
from grader.rubric import Rubric, load_rubric
from grader.sandbox.local import LocalSandbox
from grader.sandbox.process import ForkedWorker
from grader.session import Session
from grader.settings import reload as reload_settings

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
    reload_settings()


@pytest.fixture(params=["started", "forked by the zygote"])
def spawner(request: pytest.FixtureRequest) -> Iterator[Spawner | None]:
    """How the worker comes to be: its own interpreter, or forked by a local sandbox's zygote."""
    if request.param == "started":
        yield None
        return
    sandbox = LocalSandbox()
    yield sandbox.fork_reference
    sandbox.close()


@pytest.fixture()
def oracle(spawner: Spawner | None) -> Iterator[ReferenceOracle]:
    oracle = ReferenceOracle("embeddings", spawner)
    yield oracle
    oracle.close()


def oracle_on(source: str, folder: Path, monkeypatch: pytest.MonkeyPatch,
              spawner: Spawner | None = None) -> ReferenceOracle:
    """An oracle whose reference solution is ``source`` (close it after use)."""
    folder.mkdir()
    (folder / "solution.py").write_text(source, encoding="utf-8")
    monkeypatch.setattr(ModuleUnit, "reference_path", property(lambda self: folder / "solution.py"))
    return ReferenceOracle("embeddings", spawner)


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


def test_a_reference_that_fails_a_check_is_a_grader_fault(rubric: Rubric, tmp_path: Path, spawner: Spawner | None,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    broken = oracle_on(REFERENCE.read_text(encoding="utf-8") + BROKEN_FORWARD,
                       tmp_path / "broken", monkeypatch, spawner)
    try:
        with pytest.raises(HarnessProtocolError, match=r"the reference solution failed check 'emb_shape' \(error\): "
                                                         r"RuntimeError: broken reference"):
            broken.expected(visible_job(rubric, seed=1))
    finally:
        broken.close()
    assert cached_jobs() == 0  # nothing is cached from a failed run


def test_a_reference_that_does_not_import_is_a_grader_fault_that_says_why(rubric: Rubric, tmp_path: Path,
                                                                         spawner: Spawner | None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    broken = oracle_on('raise RuntimeError("no such course module")\n', tmp_path / "broken", monkeypatch, spawner)
    try:
        with pytest.raises(HarnessProtocolError, match=r"does not import.*no such course module"):
            broken.expected(visible_job(rubric, seed=1))
    finally:
        broken.close()


def test_a_reference_worker_that_died_before_its_first_job_still_says_why(rubric: Rubric, tmp_path: Path,
                                                                          spawner: Spawner | None,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The job request then meets a broken pipe: the worker's own error is still read, and no
    descriptor is left open (the streams are closed even though stdin's request cannot be sent)."""
    import time

    broken = oracle_on('raise RuntimeError("no such course module")\n', tmp_path / "broken", monkeypatch, spawner)
    try:
        broken.start()
        proc = broken._proc
        assert proc is not None
        end = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < end:
            time.sleep(0.01)
        with pytest.raises(HarnessProtocolError, match=r"does not import.*no such course module"):
            broken.expected(visible_job(rubric, seed=1))
        assert [s is None or s.closed for s in (proc.stdin, proc.stdout, proc.stderr)] == [True] * 3
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


def test_a_session_with_a_local_sandbox_forks_its_reference_worker_from_the_zygote(rubric: Rubric) -> None:
    """No second interpreter importing numpy: the worker's parent is the sandbox's zygote, and it
    answers like one started on its own."""
    import os

    job = plan(rubric, tuple(c for c in rubric.checks if c.id == "emb_lookup"), 1)
    with Session() as session:
        session.sandbox("local")
        oracle = session.oracle("embeddings")
        assert isinstance(oracle, ReferenceOracle)
        expected = oracle.expected(job)
        worker = oracle._proc
        assert isinstance(worker, ForkedWorker)
        parent = Path(f"/proc/{worker.pid}/status").read_text().split("PPid:")[1].split()[0]
        assert int(parent) != os.getpid()
    assert expected["emb_lookup"].arrays["seed_rows"].tolist() == [[20, 21], [0, 1]]
    try:  # closing the session ended it: gone, or dead and not yet reaped by its new parent
        state = Path(f"/proc/{worker.pid}/status").read_text().split("State:")[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        state = "gone"
    assert state in ("gone", "Z", "X")


def test_an_uncached_oracle_computes_every_output_whatever_the_cache_holds(rubric: Rubric) -> None:
    """What the student package ships (``grader.dist refresh``) never comes from an earlier run's
    cache entry, whose unseeded draws depend on the numpy seed that computed it first."""
    job = visible_job(rubric, seed=1)
    cached = ReferenceOracle("embeddings")
    try:
        first = cached.expected(job)
    finally:
        cached.close()
    (entry,) = [p for p in expected_cache_dir().iterdir() if not p.name.startswith(".")]
    check = next(c.id for c in job.checks if first[c.id].arrays)
    name = sorted(first[check].arrays)[0]
    np.save(entry / "out" / check / f"{name}.npy", np.full_like(first[check].arrays[name], 7.0))
    for use_cache, expected_sevens in ((True, True), (False, False)):
        oracle = ReferenceOracle("embeddings", cached=use_cache)
        try:
            got = oracle.expected(job)[check].arrays[name]
        finally:
            oracle.close()
        assert bool(np.all(got == 7.0)) is expected_sevens
    assert cached_jobs() == 1  # the uncached oracle left nothing behind
