"""Plan: rubric + seed -> the Job the sandbox runs. Fixed inputs for visible checks, seeded inputs
for the others, and nothing in the Job that would tell the student's code the answers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from grader import modules
from grader.harness.probes import encode_inputs
from grader.plan import Job, PlannedCheck, plan, submission_seed, submission_seeds
from grader.rubric import Rubric, load_rubric


@pytest.fixture(scope="module")
def rubric() -> Rubric:
    return load_rubric()


def inputs_by_check(job: Job) -> dict[str, str]:
    return {c.id: json.dumps(c.inputs, sort_keys=True) for c in job.checks}


def test_visible_checks_get_the_same_inputs_whatever_the_seed(rubric: Rubric) -> None:
    a, b = inputs_by_check(plan(rubric, rubric.checks, 1)), inputs_by_check(plan(rubric, rubric.checks, 2))
    visible = [c.id for c in rubric.checks if c.public]
    assert visible and all(a[i] == b[i] for i in visible)


def test_other_checks_draw_new_inputs_from_each_seed(rubric: Rubric) -> None:
    others = [c.id for c in rubric.checks if not c.public]
    assert others
    seen = [inputs_by_check(plan(rubric, rubric.checks, seed)) for seed in (1, 2, 3)]
    for check_id in others:
        assert len({s[check_id] for s in seen}) == 3, check_id


def test_the_same_seed_plans_the_same_job(rubric: Rubric) -> None:
    assert plan(rubric, rubric.checks, 7) == plan(rubric, rubric.checks, 7)


def test_the_sandbox_decodes_exactly_the_inputs_the_probes_made(rubric: Rubric) -> None:
    probes = modules.get(rubric.module).load_probes()
    for check in plan(rubric, rubric.checks, 5).checks:
        made = probes[check.probe].make_inputs(np.random.default_rng(0))  # for the names and types
        decoded = check.decoded()
        assert encode_inputs(decoded) == check.inputs, check.id
        assert set(decoded) == set(made), check.id
        for name, value in decoded.items():
            assert type(value) is type(made[name]), (check.id, name)
            if isinstance(value, np.ndarray):
                assert (value.dtype, value.ndim) == (made[name].dtype, made[name].ndim), (check.id, name)


def test_only_the_chosen_checks_are_planned_in_rubric_order(rubric: Rubric) -> None:
    chosen = rubric.select(public_only=True)
    job = plan(rubric, chosen, 3)
    assert [c.id for c in job.checks] == [c.id for c in chosen]
    assert all(c.visible for c in job.checks)
    assert [c.timeout_s for c in job.checks] == [c.timeout_s for c in chosen]
    assert (job.import_timeout_s, job.total_timeout_s) == (rubric.import_timeout_s, rubric.total_timeout_s)


def test_the_job_holds_no_expected_value_and_hides_the_seed_from_numpy(rubric: Rubric) -> None:
    """Only the unit's probes (public code), probe names and inputs cross into the sandbox; the numpy
    seed is derived, not the seed."""
    assert set(Job.model_fields) == {"module", "probes", "probe_files", "seed", "numpy_seed", "parallel", "import_timeout_s",
                                     "total_timeout_s", "checks"}
    assert set(PlannedCheck.model_fields) == {"id", "probe", "timeout_s", "inputs", "visible"}
    job = plan(rubric, rubric.checks, 9)
    assert "expected" not in job.model_dump_json()
    probes_dir = modules.get(rubric.module).probes_dir
    assert job.probe_files and {probes_dir / rel for rel in job.probe_files} == set(probes_dir.rglob("*.py"))
    assert job.numpy_seed != job.seed and plan(rubric, rubric.checks, 10).numpy_seed != job.numpy_seed


def test_the_numpy_seed_student_code_sees_is_no_function_of_the_submission_seed() -> None:
    """Student code can read numpy's seed; with the course secret it is drawn independently of the
    32-bit seed behind the hidden inputs, so inverting it offline does not give that seed."""
    for sha in ("a" * 64, "b" * 64, "c" * 64):
        seed, numpy_seed = submission_seeds(sha, b"course one")
        assert seed == submission_seed(sha, b"course one")
        derived_from_seed = plan(load_rubric(), (), seed).numpy_seed
        assert numpy_seed != derived_from_seed
        assert plan(load_rubric(), (), seed, numpy_seed).numpy_seed == numpy_seed
    assert submission_seeds("a" * 64, b"course one")[1] != submission_seeds("a" * 64, b"course two")[1]


def test_the_submission_seed_depends_on_the_file_and_the_course_secret() -> None:
    sha_a, sha_b = "a" * 64, "b" * 64
    first = submission_seed(sha_a, b"course one")
    assert submission_seed(sha_a, b"course one") == first and submission_seed(sha_b, b"course one") != first
    assert submission_seed(sha_a, b"course two") != first
