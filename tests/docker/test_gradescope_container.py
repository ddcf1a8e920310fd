"""Gradescope mode inside a Gradescope-like container: root, Docker's default capabilities and
seccomp profile, so namespaces are refused. The local backend must then grade in its fallback
mode (a separate uid per job, staff files closed, every process of that uid killed before the
results are written), and must refuse rather than grade when a layer of it cannot be set up."""

from __future__ import annotations

import json
import site
import textwrap
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.docker

# A process left behind by the notebook tries, after the grader has written results.json, to
# replace it with full marks and the seed secret (bounded: it gives up after 10 s).
LEFT_BEHIND = textwrap.dedent('''
    import os, time
    if os.fork() == 0:
        os.setsid()
        for _ in range(100):
            time.sleep(0.1)
            try:
                secret = open("/autograder/source/seed_secret").read()
            except OSError:
                secret = "unreadable"
            try:
                with open("/autograder/results/results.json", "w") as f:
                    f.write('{"score": 100, "output": "%s"}' % secret)
            except OSError:
                pass
        os._exit(0)
''')

SCRIPT = textwrap.dedent('''
    set -eu
    mkdir -p /autograder/source /autograder/submission
    cp -r /src/grader /src/reference /autograder/source/
    echo course-secret-1234 > /autograder/source/seed_secret
    cp /input/submission.ipynb /autograder/submission/
    cp /input/metadata.json /autograder/submission_metadata.json
    export PYTHONPATH={source}:/deps GRADER_CACHE=/var/cache/grader
    python3 -m grader.gradescope_mode --root /autograder > /autograder/log.txt 2>&1 || true
    sleep 2
    echo '=== results'
    cat /autograder/results/results.json
    echo
    echo '=== job processes'
    ps -eo uid=,comm= | awk '$1 >= 1990000000' || true
    echo '=== log'
    cat /autograder/log.txt
    ps -eo uid=,comm= | awk '$1 >= 1990000000' || true
''')


def run_in_container(client: Any, image: str, tmp_path: Path, notebook: Path, source: str = "/autograder/source",
                     course: Path = ROOT) -> tuple[dict[str, Any], str, str]:
    """(results.json, the job uid's processes still alive 2 s later, the staff log)."""
    inputs = tmp_path / "input"
    inputs.mkdir(parents=True)
    (inputs / "submission.ipynb").write_bytes(notebook.read_bytes())
    (inputs / "metadata.json").write_text(json.dumps({"id": 1, "users": [{"id": 7, "email": "a@example.org"}]}))
    deps = next(p for p in site.getsitepackages() if Path(p, "pydantic").is_dir())
    output = client.containers.run(
        image, ["bash", "-c", SCRIPT.format(source=source)], user="0", network_mode="none", remove=True,
        volumes={str(course): {"bind": "/src", "mode": "ro"}, deps: {"bind": "/deps", "mode": "ro"},
                 str(inputs): {"bind": "/input", "mode": "ro"}},
        labels={"grader.test": "gradescope-container"}, mem_limit="2g",
    ).decode("utf-8", "replace")
    results_text = output.split("=== results\n", 1)[1].split("\n=== job processes", 1)[0]
    processes, log = output.split("=== job processes\n", 1)[1].split("=== log\n", 1)
    return json.loads(results_text), processes.strip(), log


def hostile_notebook(tmp_path: Path) -> Path:
    """bug_sin_cos_swapped, whose Embedding class body starts the process above when defined."""
    notebook = json.loads((ROOT / "submissions" / "bug_sin_cos_swapped.ipynb").read_text(encoding="utf-8"))
    statement = f"    exec({LEFT_BEHIND!r})\n"
    for cell in notebook["cells"]:
        source = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "code" and "class Embedding:\n" in source:
            cell["source"] = source.replace("class Embedding:\n", "class Embedding:\n" + statement, 1)
            break
    else:
        raise AssertionError("no Embedding class in the fixture")
    path = tmp_path / "hostile.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


def test_fallback_mode_grades_and_nothing_left_behind_can_touch_the_results(
        docker_client: Any, image: str, tmp_path: Path) -> None:
    correct, processes, _ = run_in_container(docker_client, image, tmp_path / "a",
                                          ROOT / "submissions" / "correct_tinytorch.ipynb")
    assert correct["score"] == 100.0, correct.get("output")
    assert processes == ""

    results, processes, _ = run_in_container(docker_client, image, tmp_path / "b", hostile_notebook(tmp_path))
    assert 0 < results["score"] < 100.0  # graded, and the swapped sin/cos still fails
    assert "course-secret" not in json.dumps(results)
    assert processes == ""  # every process of the job's uid was killed


def test_fallback_mode_refuses_when_staff_files_stay_readable(docker_client: Any, image: str, tmp_path: Path) -> None:
    # The course's files straight from a read-only mount: the grader cannot close them to other users.
    import shutil

    course = tmp_path / "course"
    for part in ("grader", "reference"):
        shutil.copytree(ROOT / part, course / part, ignore=shutil.ignore_patterns("__pycache__"))
    for directory in [course, *(p for p in course.rglob("*") if p.is_dir())]:
        directory.chmod(0o755)
    results, _, log = run_in_container(docker_client, image, tmp_path, ROOT / "submissions" / "correct_tinytorch.ipynb",
                                       source="/src", course=course)
    assert not results.get("score") and "could not be graded" in results["output"]
    assert "official grading refused" in log and "hidden-reference" in log and "chmod -R go-rwx" in log
