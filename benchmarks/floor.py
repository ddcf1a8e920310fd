"""The in-process floor: python + numpy + the same probes on the student's code, no isolation.

Usage: python floor.py BUNDLE_DIR JOB_DIR   (JOB_DIR holds job.json and student.json)
"""

import json
import sys

sys.path[:0] = [sys.argv[1]]
import numpy  # noqa: E402,F401

from grader.harness.probes import load_probes  # noqa: E402
from grader.harness.run import execute_probe, import_student  # noqa: E402

with open(f"{sys.argv[2]}/job.json") as f:
    job = json.load(f)
with open(f"{sys.argv[2]}/student.json") as f:
    chunks = json.load(f)["chunks"]
probes = load_probes(job["probes"])
namespace, _ = import_student(chunks)
for check in job["checks"]:
    execute_probe(check, probes[check["probe"]], namespace)
