"""Run hostile code in the local sandbox, outside the test process, and describe what happened.

Usage: ``python tt_sandbox_driver.py < SPEC.json`` (possibly as another user, see
``test_local_layers.py``). SPEC holds ``codes`` (one import-only job per entry, all forked from
one zygote, so the second job is "the next submission"), ``official``, ``limits`` and ``hide``.
Prints one JSON object: per job the sandbox log, the verified layers, why it was killed, its
output files; and what the runs left on the host (cgroups they created, mounts of this mount
namespace, files in our private TMPDIR).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def main() -> None:
    spec = json.load(sys.stdin)
    from grader.errors import SandboxUnavailable
    from grader.models import Chunk
    from grader.plan import Job
    from grader.sandbox import cgroup, local

    made: list[Path] = []
    create = cgroup.JobCgroups.create.__func__  # type: ignore[attr-defined]

    def recording(cls: Any, limits: Any) -> Any:
        groups = create(cls, limits)
        made.extend(groups.dirs)
        return groups

    cgroup.JobCgroups.create = classmethod(recording)  # type: ignore[method-assign, assignment]
    mounts_before = _mounts()
    limits = local.LocalLimits(**spec.get("limits", {}))
    sandbox = local.LocalSandbox(limits, official=spec.get("official", False))
    result: dict[str, Any] = {"mode": sandbox.mode, "uid": os.getuid(), "jobs": []}
    try:
        for code in spec["codes"]:
            work = Path(tempfile.mkdtemp(prefix="tt-job-"))
            job = Job(module="embeddings", probes="grader.harness.probes", seed=0,
                      import_timeout_s=spec.get("import_timeout_s", 15),
                      total_timeout_s=spec.get("total_timeout_s", 20), checks=())
            started = time.monotonic()
            try:
                run = sandbox.run(job, [Chunk(cell=1, line=1, source=code, defines=())], work,
                                  hide=[Path(p) for p in spec.get("hide", [])])
            except SandboxUnavailable as e:
                result["jobs"].append({"refused": str(e)})
                continue
            out = {name: data.decode("utf-8", "replace") for name, data in sorted(run.outputs.items())}
            result["jobs"].append({"log": run.log, "isolation": list(run.isolation or ()), "killed": run.killed,
                                   "seconds": time.monotonic() - started, "out": out})
    finally:
        sandbox.close()
    result["cgroups_left"] = [str(p) for p in made if p.exists()]
    result["mounts_added"] = sorted(_mounts() - mounts_before)
    print(json.dumps(result))


def _mounts() -> set[str]:
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        return {" ".join(line.split()[3:5]) for line in f}


if __name__ == "__main__":
    main()
