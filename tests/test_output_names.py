"""Every output a unit's probes write is one the host reads: its reference run is read as trusted
(grader/channel.py), which refuses, loudly, a name outside [A-Za-z0-9_]{1,64}. Such a name was
once dropped without a word, and the student's output of that name was never compared (module 12's
parameter gradients)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader import modules
from grader.channel import _NAME
from grader.plan import plan
from grader.reference import ReferenceOracle
from grader.rubric import load_rubric
from grader.settings import reload as reload_settings
from grader.shipped import has_reference

UNITS = sorted(name for name in modules.installed() if has_reference(name))


@pytest.mark.parametrize("name", UNITS)
def test_every_probe_output_of_every_check_has_a_name_the_host_reads(name: str, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GRADER_CACHE", str(tmp_path / "cache"))
    reload_settings()
    rubric = load_rubric(module=name)
    oracle = ReferenceOracle(name)
    try:
        expected = oracle.expected(plan(rubric, rubric.checks, 1))
    finally:
        oracle.close()
    assert set(expected) == {c.id for c in rubric.checks}
    for check_id, out in expected.items():
        assert out.arrays or out.facts, check_id
        assert all(_NAME.match(n) for n in out.arrays), (check_id, sorted(out.arrays))
