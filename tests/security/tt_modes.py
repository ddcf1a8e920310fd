"""The local backend's three ways of running, for ``test_local_layers.py``: as root with namespaces,
as root without them (``fallback``: a separate uid per job), and as an ordinary user (uid 65534,
namespaces inside a user namespace). Each runs ``tt_sandbox_driver.py`` in a fresh process.

Fallback jobs and the ordinary user need an interpreter whose standard library and packages any
user can read. When the test's own one is not (a pyenv under /root, mode 700), a throw-away
virtual environment is made from the system interpreter of the same version, whose ``.pth``
points at this environment's packages (set ``TT_PORTABLE_PYTHON`` to use another one).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "tt_sandbox_driver.py"
NOBODY = 65534
PRELUDE = '''
import os as _tt_os, json as _tt_json
def tt(key, value):
    _tt_os.write(2, ("TT " + _tt_json.dumps({key: value}, default=str) + "\\n").encode())
'''


@dataclass(frozen=True)
class Mode:
    id: str
    user: str  # "root" or "nobody"
    local_mode: str | None  # GRADER_LOCAL_MODE, None: what the machine allows


MODES = (Mode("root", "root", None), Mode("fallback", "root", "fallback"), Mode("user", "nobody", None))


def _as_nobody(argv: list[str]) -> list[str]:
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--", *argv]


def _usable_by_nobody(python: str) -> bool:
    probe = ("import subprocess, sys; import numpy, pydantic, grader.sandbox.local; "  # the zygote runs sys.executable
             "subprocess.run([sys.executable, '-c', 'import numpy, grader.harness.zygote'], check=True)")
    try:
        done = subprocess.run(_as_nobody([python, "-c", probe]), cwd="/", env={"PATH": "/usr/bin:/bin"},
                              capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


@functools.cache
def portable_python() -> str | None:
    """An interpreter with the grader that uid 65534 (and any job uid) can run, or None."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        return None
    if os.environ.get("TT_PORTABLE_PYTHON"):
        return os.environ["TT_PORTABLE_PYTHON"]
    if _usable_by_nobody(sys.executable):
        return sys.executable
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for base in (f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        if not os.path.exists(base):
            continue
        root = Path(tempfile.mkdtemp(prefix="tt-portable-python-"))
        atexit.register(shutil.rmtree, root, True)
        os.chmod(root, 0o755)
        if subprocess.run([base, "-m", "venv", "--without-pip", str(root)], capture_output=True).returncode != 0:
            continue
        site = root / "lib" / f"python{version}" / "site-packages"
        ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and os.path.isdir(p)]
        import grader

        project = str(Path(grader.__file__).resolve().parents[1])
        (site / "tt_test_env.pth").write_text(
            "".join(f"import site; site.addsitedir({p!r})\n" for p in ours) + project + "\n", encoding="utf-8")
        python = str(root / "bin" / "python")
        if _usable_by_nobody(python):
            return python
    return None


def unavailable(mode: Mode) -> str | None:
    """Why ``mode`` cannot be exercised on this machine, or None."""
    if os.geteuid() != 0:
        return "needs root (to be root, and to become uid 65534 or a job uid)"
    if mode.id != "root" and portable_python() is None:
        return "no interpreter that other users can run (set TT_PORTABLE_PYTHON)"
    return None


@dataclass
class Outcome:
    raw: dict[str, Any]
    tmp: Path

    @property
    def jobs(self) -> list[dict[str, Any]]:
        return list(self.raw["jobs"])

    def facts(self, n: int = 0) -> dict[str, Any]:
        """What the payload of job ``n`` reported with ``tt(key, value)``."""
        found: dict[str, Any] = {}
        for line in self.jobs[n].get("log", "").splitlines():
            if line.startswith("TT {"):
                try:
                    found.update(json.loads(line[3:]))
                except ValueError:
                    continue
        return found

    def layers(self, n: int = 0) -> set[str]:
        return set(self.jobs[n].get("isolation", ()))

    def leftovers(self) -> list[str]:
        """Host state the runs left: cgroups, mounts, grader temp dirs in the private TMPDIR."""
        left = [f"cgroup {p}" for p in self.raw["cgroups_left"]]
        # a job's mounts live in its own mount namespace; one that leaked would sit under its work dir
        # (other programs on the machine may mount elsewhere meanwhile)
        left += [f"mount {m}" for m in self.raw["mounts_added"] if str(self.tmp) in m]
        left += [f"temp {p}" for p in (self.tmp / "tmp").iterdir() if not p.name.startswith("tt-job-")]
        return left


def run(mode: Mode, codes: list[str], where: Path, *, official: bool = False, limits: dict[str, int] | None = None,
        hide: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = 120,
        import_timeout_s: float = 15, total_timeout_s: float = 20) -> Outcome:
    """Run each code as an import-only job of one sandbox in ``mode``; ``where`` is a fresh directory."""
    where.mkdir(parents=True, exist_ok=True)
    for sub in ("tmp", "cache", "home"):
        (where / sub).mkdir(exist_ok=True)
    python = sys.executable if mode.id == "root" else portable_python()
    assert python is not None
    argv = [python, str(DRIVER)]
    if mode.user == "nobody":
        for p in (where, *where.iterdir()):
            os.chown(p, NOBODY, NOBODY)
        argv = _as_nobody(argv)
    os.chmod(where, 0o755)
    full_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(where / "home"), "TMPDIR": str(where / "tmp"),
                "GRADER_CACHE": str(where / "cache"), "LANG": "C.UTF-8", **(env or {})}
    if mode.local_mode:
        full_env["GRADER_LOCAL_MODE"] = mode.local_mode
    spec = {"codes": [PRELUDE + c for c in codes], "official": official, "limits": limits or {}, "hide": list(hide),
            "import_timeout_s": import_timeout_s, "total_timeout_s": total_timeout_s}
    done = subprocess.run(argv, input=json.dumps(spec).encode(), cwd=str(where), env=full_env,
                          capture_output=True, timeout=timeout)
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    assert done.returncode == 0 and lines, (
        f"the sandbox driver failed ({mode.id}, exit {done.returncode}):\n{done.stderr.decode('utf-8', 'replace')[-3000:]}")
    return Outcome(json.loads(lines[-1]), where)
