"""Per-job cgroups for the local backend: memory (swap included), CPU and pids limits that hold
for the whole submission, not per process, even for root. cgroup v1 (one hierarchy per
controller) and v2 (one unified hierarchy) are both supported; making them needs root.

The zygote moves the job's first process in before it runs anything, so every descendant is
inside. ``remove`` kills whatever is left and deletes the groups; it runs in a ``finally``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PREFIX = "tinytorch-grader"
CONTROLLERS = ("memory", "pids", "cpu")
STALE_S = 600.0  # an empty job group this old was left by a grader that was killed (no finally ran)


@dataclass(frozen=True)
class CgroupLimits:
    memory_mb: int
    max_processes: int
    cpus: float


def _is_v2(path: Path) -> bool:
    return (path / "cgroup.controllers").exists()


def _v1_settings(controller: str, limits: CgroupLimits) -> dict[str, str]:
    mem = str(limits.memory_mb * 1024 * 1024)
    period = 100_000
    return {
        "memory": {"memory.limit_in_bytes": mem, "memory.memsw.limit_in_bytes": mem, "memory.swappiness": "0"},
        "pids": {"pids.max": str(limits.max_processes)},
        "cpu": {"cpu.cfs_period_us": str(period), "cpu.cfs_quota_us": str(int(period * limits.cpus))},
    }[controller]


def _v2_settings(limits: CgroupLimits) -> dict[str, str]:
    return {"memory.max": str(limits.memory_mb * 1024 * 1024), "memory.swap.max": "0",
            "pids.max": str(limits.max_processes), "cpu.max": f"{int(100_000 * limits.cpus)} 100000"}


@dataclass
class JobCgroups:
    """The groups of one job: ``procs`` maps a controller name to its ``cgroup.procs`` file."""

    dirs: list[Path] = field(default_factory=list)
    procs: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, limits: CgroupLimits) -> JobCgroups:
        """As many of memory, pids and cpu as this machine lets us make (none when not root)."""
        made = cls()
        if os.getuid() != 0 or not ROOT.is_dir():
            return made
        reap_stale()
        name = uuid.uuid4().hex[:16]
        if _is_v2(ROOT):
            made._make_v2(ROOT, name, limits)
            return made
        for controller in CONTROLLERS:
            hierarchy = ROOT / controller
            if (hierarchy / "cgroup.procs").exists():
                made._make(controller, hierarchy / PREFIX / name, _v1_settings(controller, limits))
        unified = ROOT / "unified"
        missing = [c for c in CONTROLLERS if c not in made.procs]
        if missing and _is_v2(unified):  # hybrid: a controller not mounted on v1 may be on v2
            made._make_v2(unified, name, limits, only=missing)
        return made

    def _make_v2(self, root: Path, name: str, limits: CgroupLimits, only: list[str] | None = None) -> None:
        base = root / PREFIX
        available = (root / "cgroup.controllers").read_text().split()
        wanted = [c for c in (only or CONTROLLERS) if c in available]
        try:
            base.mkdir(exist_ok=True)
            for parent in (root, base):
                with contextlib.suppress(OSError):
                    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))
            enabled = (base / "cgroup.subtree_control").read_text().split()
        except OSError:
            return
        settings = {k: v for k, v in _v2_settings(limits).items() if k.split(".")[0] in enabled}
        group = base / name
        if self._make(None, group, settings):
            for controller in enabled:
                if controller in wanted and any(k.startswith(controller + ".") for k in settings):
                    self.procs[controller] = str(group / "cgroup.procs")

    def _make(self, controller: str | None, path: Path, settings: dict[str, str]) -> bool:
        try:
            path.parent.mkdir(exist_ok=True)
            path.mkdir()
        except OSError:
            return False
        self.dirs.append(path)
        for key, value in settings.items():
            try:
                (path / key).write_text(value)
            except OSError:
                if key not in ("memory.memsw.limit_in_bytes", "memory.swap.max", "memory.swappiness"):
                    return False  # a limit that did not take: this controller does not count
        if controller is not None:
            self.procs[controller] = str(path / "cgroup.procs")
        return True

    def remove(self) -> None:
        """Kill whatever is still inside, then delete every group."""
        for path in self.dirs:
            for _ in range(200):
                try:
                    pids = [int(p) for p in (path / "cgroup.procs").read_text().split()]
                except OSError:
                    break
                for pid in pids:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(pid, signal.SIGKILL)
                try:
                    path.rmdir()
                    break
                except OSError:
                    time.sleep(0.005)
        self.dirs.clear()


def leftovers() -> list[Path]:
    """Job cgroups that still exist (a test counts them before and after)."""
    found: list[Path] = []
    for hierarchy in [ROOT, *(ROOT / c for c in (*CONTROLLERS, "unified"))]:
        base = hierarchy / PREFIX
        if base.is_dir():
            found += [p for p in base.iterdir() if p.is_dir()]
    return found


def reap_stale(older_than_s: float = STALE_S) -> None:
    """Delete empty job groups older than ``older_than_s``: a grader process killed with SIGKILL
    never ran its ``finally``. A group that still holds a process cannot be deleted (EBUSY), and a
    fresh one is left alone: another grader may be about to move its job in."""
    now = time.time()
    for group in leftovers():
        with contextlib.suppress(OSError):
            if now - group.stat().st_mtime > older_than_s:
                group.rmdir()
