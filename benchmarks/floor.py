"""The in-process floor: python + numpy + the same probes on the student's code, no isolation.

Usage: python floor.py BUNDLE_DIR [--fork-per-check] JOB_DIR [JOB_DIR ...]
(each JOB_DIR holds job.json and student.json)

Several job directories are graded one after the other in this one process: the floor of a batch.
With ``--fork-per-check`` every check runs in its own child forked after the import, as the
grader's harness does so that no check sees what another one left behind (grader/harness/runners.py):
the floor of verdicts that do not depend on check order, still with no isolation at all.
"""

import json
import os
import sys

sys.path[:0] = [sys.argv[1]]
import numpy  # noqa: E402

from grader.harness.probes import load_probes  # noqa: E402
from grader.harness.run import execute_probe, import_student  # noqa: E402
from grader.harness.unitfiles import install  # noqa: E402

fork_per_check = "--fork-per-check" in sys.argv[2:]
for job_dir in (a for a in sys.argv[2:] if a != "--fork-per-check"):
    with open(f"{job_dir}/job.json") as f:
        job = json.load(f)
    with open(f"{job_dir}/student.json") as f:
        chunks = json.load(f)["chunks"]
    numpy.random.seed(int(job.get("numpy_seed", job.get("seed", 0))) % 2**32)  # as the harness does, before any fork
    install(job["probes"], job.get("probe_files") or {})  # the unit's probes come with the job, as in the harness
    probes = load_probes(job["probes"])
    namespace, _ = import_student(chunks)
    for check in job["checks"]:
        if not fork_per_check:
            execute_probe(check, probes[check["probe"]], namespace)
            continue
        pid = os.fork()
        if pid == 0:
            execute_probe(check, probes[check["probe"]], namespace)
            os._exit(0)
        os.waitpid(pid, 0)
