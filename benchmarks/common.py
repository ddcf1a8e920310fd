"""What every benchmark shares: the floor's job directories and its command line."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader.extract import extract  # noqa: E402
from grader.load import load_submission  # noqa: E402
from grader.models import Chunk  # noqa: E402
from grader.plan import Job, plan, submission_seed  # noqa: E402
from grader.rubric import CheckSpec, load_rubric  # noqa: E402
from grader.sandbox.bundle import ensure_bundle  # noqa: E402
from grader.secret import practice_secret  # noqa: E402


def write_job(job_dir: Path, job: Job, chunks: Sequence[Chunk]) -> None:
    """The floor's two input files (benchmarks/floor.py): the whole job, every check's inputs, and
    the student's code chunks."""
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "job.json").write_text(job.model_dump_json(), encoding="utf-8")
    (job_dir / "student.json").write_text(json.dumps({"chunks": [c.model_dump() for c in chunks]}), encoding="utf-8")


def floor_jobs(files: Sequence[Path], work: Path, checks: Sequence[CheckSpec] | None = None) -> list[Path]:
    """For each file, a directory holding the job the grader would run (all checks by default)."""
    rubric = load_rubric()
    jobs = []
    for f in files:
        sub = load_submission(f)
        job_dir = work / "floor" / f.stem
        job_dir.mkdir(parents=True)
        chosen = tuple(checks if checks is not None else rubric.checks)
        job = plan(rubric, chosen, submission_seed(sub.sha256, practice_secret()))
        write_job(job_dir, job, extract(sub, rubric.targets).chunks)
        jobs.append(job_dir)
    return jobs


def distinct_copies(files: Sequence[Path], count: int, dest: Path, tag: str, name: str = "s{n:03d}") -> list[Path]:
    """``count`` notebooks cycling through ``files`` into ``dest``, each made distinct by a comment
    cell (so that nothing is skipped as already graded); ``name`` formats each file's stem."""
    dest.mkdir(parents=True, exist_ok=True)
    made = []
    for n in range(count):
        nb = json.loads(files[n % len(files)].read_text(encoding="utf-8"))
        nb["cells"].append({"cell_type": "code", "id": f"bench{n}", "metadata": {}, "execution_count": None,
                            "outputs": [], "source": f"# {tag} {n}\n"})
        path = dest / f"{name.format(n=n)}.ipynb"
        path.write_text(json.dumps(nb), encoding="utf-8")
        made.append(path)
    return made


def floor_command(job_dir: Path) -> list[str]:
    """The floor for one job: python + numpy + the same probes in-process (benchmarks/floor.py)."""
    return [sys.executable, str(ROOT / "benchmarks" / "floor.py"), str(ensure_bundle()), str(job_dir)]
