"""The docker backend end to end: scores, agreement with local, limits, deadlines, cleanup, image."""

from __future__ import annotations

import hashlib
import io
import os
import signal
import tarfile
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"
ALL_SUBMISSIONS = sorted(p for p in SUBMISSIONS.iterdir() if p.suffix in (".ipynb", ".py"))


def test_correct_submission_scores_full_marks_officially(grader_docker: Any, docker_client: Any, image: str) -> None:
    report = grader_docker.grade(SUBMISSIONS / "correct_tinytorch.ipynb")
    assert report.max_score == 100
    assert report.score == 100, [(c.id, c.status, c.message) for c in report.checks if c.status != "passed"]
    assert report.backend.name == "docker"
    assert report.backend.label == "official"
    assert report.backend.image == docker_client.images.get(image).id
    assert report.backend.image.startswith("sha256:")
    assert report.backend.limits["memory_mb"] == report.backend.limits["memory_swap_mb"]
    assert "network-none" in report.backend.isolation


@pytest.mark.parametrize("path", ALL_SUBMISSIONS, ids=[p.name for p in ALL_SUBMISSIONS])
def test_docker_and_local_agree_on_every_check(path: Path, grader_docker: Any, grader_local: Any) -> None:
    local, docker = grader_local.grade(path), grader_docker.grade(path)
    assert [(c.id, c.status) for c in docker.checks] == [(c.id, c.status) for c in local.checks]
    assert docker.score == local.score


# ---- the container's settings ------------------------------------------------------------------


def test_container_config_claims_every_limit(image: str) -> None:
    from grader.sandbox.docker import LABEL, DockerLimits, container_config

    limits = DockerLimits()
    cfg = container_config(image, limits, "abc")
    assert cfg["network_mode"] == "none"
    assert cfg["read_only"] is True
    assert cfg["cap_drop"] == ["ALL"]
    assert "cap_add" not in cfg and cfg["privileged"] is False
    assert cfg["security_opt"] == ["no-new-privileges"]  # the default seccomp profile stays on
    assert cfg["user"] == "65534:65534"
    assert cfg["pids_limit"] == limits.pids > 0
    assert cfg["mem_limit"] == cfg["memswap_limit"] == limits.memory_mb * 1024 * 1024
    assert cfg["nano_cpus"] == int(limits.cpus * 1e9) > 0
    assert {u.name: (u.soft, u.hard) for u in cfg["ulimits"]} == {
        "nofile": (limits.max_open_files,) * 2, "fsize": (limits.max_file_mb << 20,) * 2, "core": (0, 0)}
    assert cfg["init"] is False  # the bootstrap is PID 1: nothing else holds the container's stdio
    assert cfg["log_config"].type == "none"
    assert set(cfg["tmpfs"]) == {"/work", "/tmp"} and all(f"size={limits.tmpfs_mb}m" in v for v in cfg["tmpfs"].values())
    assert not any(k in cfg for k in ("volumes", "mounts", "devices", "volumes_from"))
    assert cfg["labels"] == {LABEL: "1", "grader.run": "abc"}
    assert container_config(image, limits, "abc", {"x": "y", LABEL: "0"})["labels"] == {"x": "y", LABEL: "1", "grader.run": "abc"}
    assert set(cfg["environment"]) <= {"PATH", "HOME", "TMPDIR", "LANG", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
                                       "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"}


def test_a_running_sandbox_container_has_those_settings(
        sandbox: Any, fast_rubric: Path, hostile: Any, docker_client: Any, labelled: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from grader import Grader

    monkeypatch.setenv("TT_HOST_SECRET", "do-not-leak")
    path = hostile("slow_import", '__import__("time").sleep(2)')
    seen: list[dict[str, Any]] = []

    def watch() -> None:
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            for c in labelled():
                if c["State"] == "running":
                    seen.append(docker_client.api.inspect_container(c["Id"]))
                    return
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    with Grader(fast_rubric, sandbox) as g:
        g.grade(path)
    watcher.join()
    assert seen, "no running sandbox container was observed"
    inspected = seen[0]
    host, config = inspected["HostConfig"], inspected["Config"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and not host["CapAdd"]
    assert host["Privileged"] is False
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert config["User"] == "65534:65534"
    assert host["PidsLimit"] == sandbox.limits.pids
    assert host["Memory"] == host["MemorySwap"] == sandbox.limits.memory_mb << 20
    assert host["NanoCpus"] > 0
    assert {u["Name"]: u["Hard"] for u in host["Ulimits"]} == {
        "nofile": sandbox.limits.max_open_files, "fsize": sandbox.limits.max_file_mb << 20, "core": 0}
    assert host["Init"] is False
    assert host["LogConfig"]["Type"] == "none"
    assert not host["Binds"] and not host.get("Mounts") and not inspected["Mounts"]
    assert not host["Devices"] and not host.get("VolumesFrom")
    assert set(host["Tmpfs"]) == {"/work", "/tmp"}
    assert inspected["Image"] == sandbox.image_id
    env = dict(e.split("=", 1) for e in config["Env"])
    assert "TT_HOST_SECRET" not in env and "do-not-leak" not in str(config)
    assert "docker.sock" not in str(inspected)
    assert inspected["NetworkSettings"]["Networks"].keys() <= {"none"}


# ---- deadlines, Ctrl-C and leftovers -----------------------------------------------------------


@pytest.mark.slow
def test_a_hanging_import_is_killed_within_its_deadline(
        sandbox: Any, fast_rubric: Path, hostile: Any, labelled: Any) -> None:
    from grader import Grader
    from grader.sandbox.docker import STOP_GRACE_S

    with Grader(fast_rubric, sandbox) as g:
        started = time.monotonic()
        report = g.grade(hostile("hang", '__import__("time").sleep(1000)'))
        took = time.monotonic() - started
    import_timeout = g.rubric.import_timeout_s
    assert took < import_timeout + STOP_GRACE_S + 30.0, took  # the import sleeps 1000 s; room for a loaded machine
    assert report.score == 0
    assert {c.status for c in report.checks} == {"timeout"}
    assert labelled() == []


def test_the_bootstrap_is_out_of_reach_of_the_job(
        sandbox: Any, fast_rubric: Path, hostile: Any, labelled: Any) -> None:
    """The bootstrap is the container's PID 1 and not dumpable: the job can neither stop or kill it
    nor open its stdin (the hidden checks' inputs, the stop byte) or stdout (the result stream)."""
    from grader import Grader

    # SIGSTOP to the harness's parent and to PID 1; a division by zero (so no Embedding) if the
    # container's stdin or stdout can be reached through PID 1
    statement = ("_reach = [__import__('os').kill(pid, 19) for pid in (__import__('os').getppid(), 1)] + "
                 "[1 / 0 for fd in (0, 1) if __import__('os').access(f'/proc/1/fd/{fd}', 0)]")
    with Grader(fast_rubric, sandbox) as g:
        report = g.grade(hostile("reach", statement))
    assert {c.status for c in report.checks} == {"passed"}, [(c.id, c.status) for c in report.checks]
    assert labelled() == []


def test_a_container_whose_bootstrap_is_not_pid_1_is_refused(
        image: str, test_labels: dict[str, str], fast_rubric: Path, labelled: Any) -> None:
    from grader import Grader
    from grader.errors import SandboxError
    from grader.sandbox.docker import DockerSandbox

    class WithDockerInit(DockerSandbox):
        def container_config(self, run_id: str | None = None) -> dict[str, Any]:
            return {**super().container_config(run_id), "init": True}

    box = WithDockerInit(image, labels=test_labels, keep_ready=False)
    try:
        with Grader(fast_rubric, box) as g, pytest.raises(SandboxError, match="not its PID 1"):
            g.grade(SUBMISSIONS / "correct_tinytorch.ipynb")
    finally:
        box.close()
    assert labelled() == []


@pytest.mark.slow
def test_a_hanging_check_times_out_and_the_others_still_pass(sandbox: Any, fast_rubric: Path, tmp_path: Path) -> None:
    from grader import Grader

    source = (SUBMISSIONS / "correct_source.py").read_text(encoding="utf-8")
    patched = source.replace("    def parameters(self)", "    def parameters(self):\n        while True: pass\n\n"
                             "    def _unused(self)", 1)
    assert patched != source
    path = tmp_path / "loop.py"
    path.write_text(patched, encoding="utf-8")
    with Grader(fast_rubric, sandbox) as g:
        report = g.grade(path)
    statuses = {c.status for c in report.checks}
    assert "timeout" in statuses and "passed" in statuses


def test_ctrl_c_during_a_run_leaves_no_container(sandbox: Any, fast_rubric: Path, hostile: Any, labelled: Any) -> None:
    from grader import Grader

    path = hostile("slow", '__import__("time").sleep(30)')
    # Ctrl-C is pressed again every half second until one lands: a KeyboardInterrupt raised while
    # the interpreter runs a finalizer is swallowed ("Exception ignored in ..."), as on a terminal;
    # only the first raises, so that none can escape the test after it.
    interrupted, done = threading.Event(), threading.Event()

    def first_only(signum: int, frame: Any) -> None:
        if not interrupted.is_set():
            interrupted.set()
            raise KeyboardInterrupt

    def press() -> None:
        done.wait(1.5)
        while not done.is_set() and not interrupted.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            done.wait(0.5)

    previous = signal.signal(signal.SIGINT, first_only)
    presser = threading.Thread(target=press, daemon=True)
    try:
        with Grader(fast_rubric, sandbox) as g:
            presser.start()
            with pytest.raises(KeyboardInterrupt):
                g.grade(path)
    finally:
        done.set()
        presser.join()
        signal.signal(signal.SIGINT, previous)
    assert labelled() == []


def test_cleanup_removes_leftover_labelled_containers(
        docker_client: Any, image: str, labelled: Any, test_labels: dict[str, str]) -> None:
    from grader.sandbox.docker import LABEL, cleanup, container_config

    # an extra label of its own: the session's sandbox keeps a container of this session waiting
    labels = {**test_labels, "grader.test.leftover": "1"}
    config = container_config(docker_client.images.get(image).id, run_id="leftover", labels=labels)
    config["command"] = ["python3", "-c", "import time; time.sleep(600)"]
    left = docker_client.containers.create(**config)
    left.start()
    assert [c["Id"] for c in labelled()] == [left.id]
    assert cleanup(docker_client, older_than_s=3600, labels=labels) == 0  # too young: maybe in use
    assert cleanup(docker_client, labels=labels) == 1
    assert labelled() == []
    unrelated = docker_client.containers.create(image, ["true"], network_mode="none", labels=labels)
    try:
        assert cleanup(docker_client, labels=labels) == 0  # no grader label: not ours to remove
        docker_client.containers.get(unrelated.id)
    finally:
        unrelated.remove(force=True)
    assert LABEL == "tinytorch-grader"


# ---- the image -----------------------------------------------------------------------------------


def test_image_holds_the_bundle_but_no_reference_solution_or_rubric(docker_client: Any, image: str) -> None:
    from grader import modules

    staff = [f for unit in modules.installed().values()
             for f in (unit.rubric_path, *unit.reference_path.parent.rglob("*"), *(unit.root / "judge").rglob("*.py"))
             if f.is_file()]
    secrets = {hashlib.sha256(f.read_bytes()).hexdigest(): f.name for f in staff}
    sizes = {f.stat().st_size for f in staff}
    container = docker_client.containers.create(image, ["true"], network_mode="none")
    try:
        stream = container.export(chunk_size=1 << 20)
        data = io.BytesIO(b"".join(stream))
    finally:
        container.remove(force=True)
    names, leaked = [], []
    with tarfile.open(fileobj=data, mode="r|") as tar:
        for member in tar:
            names.append(member.name)
            if member.isfile() and member.size in sizes:
                f = tar.extractfile(member)
                assert f is not None
                digest = hashlib.sha256(f.read()).hexdigest()
                if digest in secrets:
                    leaked.append((member.name, secrets[digest]))
    assert leaked == []
    bundle = {n.split("/")[2] for n in names if n.startswith("opt/grader/") and n.count("/") >= 2 and n.split("/")[2]}
    assert bundle == {"grader", "tinytorch"}
    graded = {"/".join(n.split("/")[3:5]) for n in names if n.startswith("opt/grader/grader/") and n.count("/") >= 4}
    assert {g.split("/")[0] for g in graded} <= {"__init__.py", "__pycache__", "harness", "modules"}  # no judge or rubric
    assert not [n for n in names if n.startswith("opt/grader/grader/modules/") and ("/judge/" in n or "/reference/" in n)]
    assert not [n for n in names if "solution" in n.lower() or n.endswith(".toml")]
    assert any(n.endswith("numpy/__init__.py") for n in names)


def test_image_runs_python_numpy_and_the_harness_as_nobody(docker_client: Any, image: str) -> None:
    code = ("import os, numpy, grader.harness.run, tinytorch.core.tensor; "
            "print(os.getuid(), numpy.__version__, sorted(os.listdir('/opt/grader')))")
    out = docker_client.containers.run(image, ["python3", "-I", "-c", f"import sys; sys.path[:0] = ['/opt/grader']; {code}"],
                                       network_mode="none", remove=True)
    uid, _, listing = out.decode().strip().split(" ", 2)
    assert uid == "65534"
    assert listing == "['grader', 'tinytorch']"


def test_image_tag_is_a_content_hash_and_is_built_once(image: str) -> None:
    from grader.sandbox.image import build_image, image_tag

    assert image == image_tag()
    assert image.startswith("tinytorch-grader:") and len(image.split(":")[1]) == 16
    said: list[str] = []
    started = time.monotonic()
    assert build_image(progress=said.append) == image
    assert said == [] and time.monotonic() - started < 30  # found, not built again (a build takes minutes)


@pytest.mark.slow
def test_a_grader_killed_hard_leaves_no_container_behind(
        fast_rubric: Path, hostile: Any, labelled: Any, tmp_path: Path, image: str, test_labels: dict[str, str]) -> None:
    import subprocess
    import sys

    from grader.sandbox.docker import BACKSTOP_GRACE_S

    path = hostile("forever", '__import__("time").sleep(1000)')
    script = ("import sys; from grader import Grader; from grader.sandbox.docker import DockerSandbox; "
              f"Grader({str(fast_rubric)!r}, DockerSandbox({image!r}, labels={test_labels!r})).grade({str(path)!r})")
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not [c for c in labelled() if c["State"] == "running"]:
            assert time.monotonic() < deadline, "the grader never started a container"
            time.sleep(0.1)
        started = time.monotonic()
        proc.kill()  # SIGKILL: no finally, no atexit
        proc.wait()
        budget = 15 + BACKSTOP_GRACE_S + 10  # the fast rubric's total timeout, the backstop, slack
        while labelled():
            assert time.monotonic() - started < budget, labelled()
            time.sleep(0.25)
        print(f"container gone {time.monotonic() - started:.1f} s after its grader was killed")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
