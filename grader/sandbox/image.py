"""The Docker image of the official sandbox: python3, numpy, the harness and the course runtime.

It never holds the reference solution, the rubrics or anything else of the grader: the build
context is made in memory from ``ensure_bundle()`` (the harness and the course runtimes). It holds
no course-module unit either: each job brings its unit's probes (grader/harness/unitfiles.py), so
installing or editing a unit leaves the tag as it is.

Two recipes give the same layout (the bundle at ``/opt/grader``, user 65534, workdir
``/work``):

- offline (default; machines without a registry): ``debootstrap --variant=minbase`` a Debian root
  filesystem with python3 and python3-numpy from the system's default package mirror, shrink it,
  ``docker import`` it as a base image, then build the thin bundle layer on it with no network;
- online (``GRADER_IMAGE_ONLINE=1`` or ``offline=False``): ``FROM python:3.11-slim`` + ``pip install
  numpy`` + the same bundle layer.

The tag is ``tinytorch-grader:<hash>`` with the hash taken over the bundle and the recipe text, so
the image is rebuilt only when the harness, a runtime or this recipe changes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import io
import os
import re
import shutil
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from ..errors import SandboxError, SandboxUnavailable
from ..paths import cache_root
from .bundle import bundle_hash, ensure_bundle

REPOSITORY = "tinytorch-grader"
BASE_REPOSITORY = "tinytorch-grader-base"
LABEL = "tinytorch-grader.image"
BUNDLE_DIR = "/opt/grader"
SANDBOX_USER = "65534:65534"
ROOTFS_PACKAGES = ("python3", "python3-numpy")
# Removed from the debootstrapped tree: documentation, translations and package caches.
ROOTFS_PRUNE = (
    "usr/share/doc", "usr/share/man", "usr/share/info", "usr/share/locale", "usr/share/lintian",
    "usr/share/linda", "usr/share/bug", "usr/share/common-licenses", "var/cache/apt", "var/lib/apt/lists",
    "var/cache/debconf/templates.dat-old", "var/log", "tmp",
)

_BUNDLE_LAYER = f"""\
COPY grader {BUNDLE_DIR}
RUN python3 -c "import numpy" \\
 && python3 -m compileall -q {BUNDLE_DIR} \\
 && chmod -R a+rX,go-w {BUNDLE_DIR} \\
 && mkdir -p /work && chmod 0755 /work
ENV LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
WORKDIR /work
USER {SANDBOX_USER}
"""

OFFLINE_DOCKERFILE = "FROM {base}\n" + _BUNDLE_LAYER
ONLINE_DOCKERFILE = """\
FROM python:3.11-slim
RUN pip install --no-cache-dir numpy
""" + _BUNDLE_LAYER

# What the tag hashes besides the bundle: every input of both recipes.
RECIPE = "\n".join((
    "recipe 1", OFFLINE_DOCKERFILE, ONLINE_DOCKERFILE,
    "debootstrap --variant=minbase --include=" + ",".join(ROOTFS_PACKAGES), *ROOTFS_PRUNE,
))

Progress = Callable[[str], None]


def _stderr_progress(message: str) -> None:
    print(f"[grader image] {message}", file=sys.stderr, flush=True)


def image_tag() -> str:
    """``tinytorch-grader:<hash of bundle + recipe>``: the image the docker backend runs."""
    digest = hashlib.sha256(f"{bundle_hash()}\0{RECIPE}".encode()).hexdigest()[:16]
    return f"{REPOSITORY}:{digest}"


def offline_default() -> bool:
    """Offline (debootstrap) unless ``GRADER_IMAGE_ONLINE=1``."""
    from ..settings import settings

    return not settings().image_online


def docker_client(timeout: int = 600) -> Any:
    """A docker SDK client that answered a ping, or SandboxUnavailable saying how to get one."""
    try:
        import docker  # type: ignore[import-untyped,unused-ignore]
    except ImportError:
        raise SandboxUnavailable(
            "the docker backend needs the Docker SDK for Python: pip install 'tinytorch-grader[docker]'"
        ) from None
    client = None
    try:
        _probe_unix_socket()
        client = docker.from_env(timeout=timeout, max_pool_size=32)
        client.ping()
    except Exception as e:  # DockerException, requests errors, socket errors: all mean "not reachable"
        if client is not None:
            client.close()
        raise SandboxUnavailable(
            f"cannot reach the Docker engine ({type(e).__name__}: {str(e)[:200]}). Start it: "
            "`sudo systemctl start docker`, or on a machine without systemd "
            "`sudo dockerd --bridge=none --iptables=false --ip-masq=false &` (this repository's "
            "`.ci/docker-engine.sh` does that and builds the image); set DOCKER_HOST if the engine "
            "listens elsewhere, and make sure your user may use its socket"
        ) from None
    return client


def _probe_unix_socket() -> None:
    """Fail fast, closing our socket, when the engine's Unix socket does not accept connections.

    (The SDK leaks its socket when the connection is refused.)
    """
    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(5)
        probe.connect(host[len("unix://"):])


def image_exists(client: Any, ref: str) -> bool:
    import docker  # type: ignore[import-untyped,unused-ignore]

    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def build_image(offline: bool | None = None, progress: Progress | None = None, *, force: bool = False) -> str:
    """Build the sandbox image if it is missing and return its tag.

    ``offline=None`` picks offline unless ``GRADER_IMAGE_ONLINE=1``. The first offline build runs
    debootstrap (about a minute with a nearby mirror, and needs root); later builds reuse the
    cached root filesystem tarball and base image.
    """
    say = progress or _stderr_progress
    with contextlib.closing(docker_client()) as client:
        return _build_image(client, offline_default() if offline is None else offline, say, force)


def _build_image(client: Any, offline: bool, say: Progress, force: bool) -> str:
    tag = image_tag()
    if not force and image_exists(client, tag):
        return tag
    with _lock(_lock_path(), say):
        if not force and image_exists(client, tag):  # built by another process while we waited
            return tag
        started = time.monotonic()
        say(f"building the sandbox image {tag} ({'offline: debootstrap' if offline else 'online: python:3.11-slim'})")
        if offline:
            base = _ensure_base(client, say)
            dockerfile, network = OFFLINE_DOCKERFILE.format(base=base), "none"
        else:
            dockerfile, network = ONLINE_DOCKERFILE, None
        _build(client, dockerfile, tag, network, say)
        say(f"built {tag} in {time.monotonic() - started:.0f} s")
    return tag


# ---- offline base: debootstrap → tarball → docker import ---------------------------------------


def os_suite() -> str:
    """The Debian suite of this machine (VERSION_CODENAME), or bookworm when it has none."""
    try:
        text = Path("/etc/os-release").read_text(encoding="utf-8")
    except OSError:
        text = ""
    match = re.search(r"^VERSION_CODENAME=\"?([a-z]+)\"?\s*$", text, re.M)
    return match.group(1) if match else "bookworm"


def _arch() -> str:
    try:
        out = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True)
        return out.stdout.strip() or "amd64"
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


def rootfs_key(suite: str, arch: str) -> str:
    text = "\n".join(("rootfs 1", suite, arch, ",".join(ROOTFS_PACKAGES), *ROOTFS_PRUNE))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _ensure_base(client: Any, say: Progress) -> str:
    suite, arch = os_suite(), _arch()
    key = rootfs_key(suite, arch)
    base = f"{BASE_REPOSITORY}:{suite}-{key}"
    if image_exists(client, base):
        say(f"base image {base} is already there")
        return base
    tarball = cache_root() / f"rootfs-{suite}-{arch}-{key}.tar"
    if tarball.is_file():
        say(f"reusing the cached root filesystem {tarball}")
    else:
        _make_rootfs(suite, arch, tarball, say)
    say(f"importing {tarball.name} ({tarball.stat().st_size / 1e6:.0f} MB) as {base}")
    client.api.import_image_from_file(str(tarball), repository=base.split(":")[0], tag=base.split(":")[1])
    if not image_exists(client, base):
        raise SandboxError(f"docker import of {tarball} did not create {base}")
    return base


def _make_rootfs(suite: str, arch: str, tarball: Path, say: Progress) -> None:
    debootstrap = shutil.which("debootstrap") or next(
        (p for p in ("/usr/sbin/debootstrap", "/sbin/debootstrap") if os.path.exists(p)), None)
    if debootstrap is None:
        raise SandboxUnavailable("building the image offline needs debootstrap: sudo apt-get install -y debootstrap "
                                 "(or build online with GRADER_IMAGE_ONLINE=1 on a machine that can pull images)")
    if os.geteuid() != 0:
        raise SandboxUnavailable("debootstrap needs root: run `sudo grader image build --offline` once "
                                 "(or build online with GRADER_IMAGE_ONLINE=1)")
    tarball.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".rootfs-", dir=tarball.parent))
    try:
        root = work / "root"
        argv = [debootstrap, "--variant=minbase", f"--arch={arch}", "--include=" + ",".join(ROOTFS_PACKAGES),
                suite, str(root)]
        say(f"running debootstrap for Debian {suite}/{arch} with {', '.join(ROOTFS_PACKAGES)} "
            "(downloads ~60 MB from the system's package mirror; takes a minute or more)")
        _run_logged(argv, say, "debootstrap")
        for rel in ROOTFS_PRUNE:
            target = root / rel
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
                target.mkdir()
                target.chmod(0o1777 if rel == "tmp" else 0o755)
            elif target.exists() or target.is_symlink():
                target.unlink()
        for cache in root.glob("var/cache/debconf/*-old"):
            cache.unlink()
        say("packing the root filesystem")
        partial = work / "rootfs.tar"
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", str(partial),
                        "--exclude=./dev/*", "--exclude=./proc/*", "--exclude=./sys/*", "."],
                       check=True, stdin=subprocess.DEVNULL)
        partial.replace(tarball)
    finally:
        _unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)


def _unmount_under(path: Path) -> None:
    """Undo mounts a failed debootstrap left inside ``path`` (proc, sys), so rmtree stays inside it."""
    prefix = str(path.resolve()) + "/"
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _run_logged(argv: list[str], say: Progress, what: str) -> None:
    """Run a command, passing each output line on as progress and keeping the tail for errors."""
    tail: list[str] = []
    last, steps = 0.0, 0
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            line = line.rstrip()
            if line:
                tail = [*tail, line][-20:]
                if not line.startswith(("I:", "W:", "E:")):
                    continue
                steps += 1
                per_package = re.match(r"I: (Retrieving|Validating|Extracting|Unpacking|Configuring) \S", line)
                now = time.monotonic()
                if not per_package or now - last >= 3.0:  # a heartbeat, not hundreds of lines
                    say(f"{what}: {line[2:].strip()}" + (f" (step {steps})" if per_package else ""))
                    last = now
    finally:
        rc = proc.wait()
    if rc != 0:
        raise SandboxError(f"{what} failed (exit status {rc}):\n" + "\n".join(tail))


# ---- the bundle layer ----------------------------------------------------------------------------


def build_context(dockerfile: str) -> bytes:
    """The build context as an in-memory tar: the Dockerfile and the bundle under ``grader/``."""
    bundle = ensure_bundle()
    if not (bundle / "grader" / "harness" / "docker_boot.py").is_file():
        raise SandboxError(f"the sandbox bundle {bundle} has no harness")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "Dockerfile", dockerfile.encode())
        for path in sorted(bundle.rglob("*.py")):
            if path.is_symlink() or not path.is_file():
                continue
            _add_bytes(tar, "grader/" + path.relative_to(bundle).as_posix(), path.read_bytes())
    return buf.getvalue()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, 1_700_000_000
    tar.addfile(info, io.BytesIO(data))


def _build(client: Any, dockerfile: str, tag: str, network: str | None, say: Progress) -> None:
    import docker  # type: ignore[import-untyped,unused-ignore]

    context = io.BytesIO(build_context(dockerfile))
    say("adding the harness and the course runtime layer")
    try:
        stream = client.api.build(
            fileobj=context, custom_context=True, tag=tag, rm=True, forcerm=True, pull=False,
            network_mode=network, decode=True, labels={LABEL: "1", f"{LABEL}.bundle": bundle_hash()},
        )
        for item in stream:
            if "error" in item:
                raise SandboxError(f"docker build failed: {str(item['error']).strip()}")
            text = str(item.get("stream", "")).strip()
            if text.startswith("Step "):
                say(f"build: {text}")
    except docker.errors.APIError as e:
        raise SandboxError(f"docker build failed: {e}") from None
    if not image_exists(client, tag):
        raise SandboxError(f"docker build did not produce {tag}")


def _lock_path() -> Path:
    """One lock per user, whatever GRADER_CACHE says: test runs give each grader its own cache."""
    try:
        return Path.home() / ".cache" / "tinytorch-grader" / "image.lock"
    except RuntimeError:  # no home directory
        return cache_root() / "image.lock"


@contextlib.contextmanager
def _lock(path: Path, say: Progress) -> Iterator[None]:
    """One image build at a time on this machine (per cache directory)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "r+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            say("another grader process is building the image; waiting for it")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def remove_old_images(keep: str | None = None) -> int:
    """Remove ``tinytorch-grader:*`` images other than ``keep`` (default: the current tag)."""
    import docker  # type: ignore[import-untyped,unused-ignore]

    keep = keep or image_tag()
    removed = 0
    with contextlib.closing(docker_client()) as client:
        for image in client.images.list(name=REPOSITORY):
            if keep in image.tags:
                continue
            for t in image.tags:
                try:
                    client.images.remove(t)
                    removed += 1
                except docker.errors.APIError:
                    pass
    return removed
