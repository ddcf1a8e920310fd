"""Fresh virtual environments for the packaging tests, built offline.

A test environment gets its own interpreter, pip and setuptools, and sees the third-party packages
of the environment running the tests (numpy, pydantic, pytest ...) through a ``.pth`` line that
points at a folder of links to them. The grader and TinyTorch are never among those links: they
are installed into the fresh environment by pip, for real, from a wheel built here or a checkout.
pip runs with no index at all (``PIP_NO_INDEX``), so these tests need no network.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OURS = ("grader", "tinytorch", "tito", "_tinytorch_grader", "tinytorch_grader")  # never linked from the outer env


@dataclass(frozen=True)
class Venv:
    path: Path
    env: Mapping[str, str]

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def python(self) -> Path:
        return self.bin / "python"

    @property
    def site_packages(self) -> Path:
        return Path(self.run_python("import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())

    def run(self, *args: str | Path, cwd: Path | None = None, stdin: str | None = None, timeout: float = 300,
            check: bool = False) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(a) for a in args], cwd=cwd, env=dict(self.env), capture_output=True, text=True,
                              input=stdin if stdin is not None else "", timeout=timeout)
        if check and done.returncode != 0:
            raise AssertionError(f"{' '.join(map(str, args))} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    def run_python(self, code: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-c", code, cwd=cwd, check=True)

    def pip(self, *args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return self.run(self.python, "-m", "pip", *args, cwd=cwd, check=True)


# What only the staff package and the service need: a student's laptop need not have any of it.
SERVER_PACKAGES = ("sqlalchemy", "alembic", "mako", "jinja2", "fastapi", "starlette", "uvicorn", "celery", "kombu",
                   "billiard", "psycopg", "redis", "docker", "jwt", "pyjwt", "prometheus_client", "multipart",
                   "python_multipart", "lti1p3platform", "selenium")


def outer_packages(link_dir: Path, leave_out: tuple[str, ...] = ()) -> Path:
    """A folder of links to the running environment's third-party packages, ours (and ``leave_out``,
    by name prefix) left out."""
    link_dir.mkdir(parents=True, exist_ok=True)
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if (entry.suffix == ".pth" or name.startswith(OURS) or name.startswith(("pip", "setuptools", "_distutils"))
                or name.startswith(leave_out)):
            continue
        (link_dir / entry.name).symlink_to(entry)
    return link_dir


def make_venv(path: Path, links: Path, *, home: Path, find_links: Path | None = None,
              extra_env: Mapping[str, str] | None = None, python: str = sys.executable) -> Venv:
    subprocess.run([python, "-m", "venv", str(path)], check=True, capture_output=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "PYTHON", "VIRTUAL_ENV"))}
    env.update({
        "PATH": f"{path / 'bin'}{os.pathsep}{env.get('PATH', '')}", "VIRTUAL_ENV": str(path), "HOME": str(home),
        "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0", "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PIP_NO_WARN_SCRIPT_LOCATION": "0", "COLUMNS": "100", "TERM": "dumb", "NO_COLOR": "1",
        **({"PIP_FIND_LINKS": str(find_links)} if find_links else {}), **(extra_env or {}),
    })
    venv = Venv(path, env)
    (venv.site_packages / "zz_outer_packages.pth").write_text(f"{links}\n", encoding="utf-8")
    return venv


def build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of a source tree with the running environment's hatchling (no network)."""
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True, timeout=600)
    (wheel,) = sorted(out.glob("*.whl"))
    return wheel


def stub_wheels(out: Path, *requirements: str) -> Path:
    """Empty wheels ``name==version`` (metadata only): stand-ins for heavy packages a tool installs."""
    out.mkdir(parents=True, exist_ok=True)
    for requirement in requirements:
        name, version = requirement.split("==")
        info = f"{name}-{version}.dist-info"
        files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: empty stand-in\n",
                 f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
        files[f"{info}/RECORD"] = "".join(f"{f},,\n" for f in [*files, f"{info}/RECORD"])
        with zipfile.ZipFile(out / f"{name}-{version}-py3-none-any.whl", "w") as z:
            for name_, text in files.items():
                z.writestr(name_, text)
    return out
