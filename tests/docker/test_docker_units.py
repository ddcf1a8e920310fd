"""Host-side pieces of the docker backend that need no engine: the output stream, safe writing,
names, the bootstrap source and the "engine not reachable" message."""

from __future__ import annotations

import json
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from grader.errors import SandboxError
from grader.sandbox.docker import bootstrap_source
from grader.sandbox.stream import MAX_OUTPUT_FILE, OutputStream, valid_output_name


def record(name: str, data: bytes) -> bytes:
    raw = name.encode()
    return b"F" + struct.pack(">H", len(raw)) + raw + struct.pack(">I", len(data)) + data


def test_stream_in_pieces_of_any_size() -> None:
    whole = b"I" + record("import.json", b"{}") + record("c1/out.npy", b"x" * 1000) + b"E"
    for step in (1, 3, 7, 64, len(whole)):
        s = OutputStream(1 << 20)
        for i in range(0, len(whole), step):
            s.feed(whole[i:i + step])
        assert s.imported and s.ended and s.broken is None
        assert s.files == {"import.json": b"{}", "c1/out.npy": b"x" * 1000}


@pytest.mark.parametrize("bad", [
    b"X", record("../evil", b""), record("/abs", b""), record("a/b/c", b""), record(".hidden", b""),
    record("c1/..", b""), record("c1/.", b""), record("a b", b""), record("", b""),
    record("ok", b"1") + record("ok", b"2"),
])
def test_malformed_streams_are_rejected_whole(bad: bytes) -> None:
    s = OutputStream(1 << 20)
    s.feed(record("import.json", b"{}") + bad + b"E")
    assert s.broken is not None and s.files == {} and not s.ended


def test_caps_on_total_and_per_file_size() -> None:
    s = OutputStream(100)
    s.feed(record("a", b"x" * 60) + record("b", b"x" * 60))
    assert s.broken and s.files == {}
    s = OutputStream(1 << 40)
    s.feed(b"F" + struct.pack(">H", 1) + b"a" + struct.pack(">I", MAX_OUTPUT_FILE + 1))
    assert s.broken


def test_a_flood_of_markers_is_linear() -> None:
    s = OutputStream(1 << 20)
    s.feed(b"I" * (8 << 20))
    assert s.imported and not s.broken and len(s.buf) == 0


@pytest.mark.parametrize("name,ok", [
    ("import.json", True), ("emb_shape.status.json", True), ("emb_shape/out.npy", True),
    ("..", False), ("a/..", False), ("a/b/c", False), ("/etc", False), ("a\\b", False), ("é", False),
    (".x", False), ("a/.tmp", False), ("x" * 129, False),
])
def test_output_names(name: str, ok: bool) -> None:
    assert valid_output_name(name) is ok


def _reader(sock: socket.socket, stream: bytes) -> Any:
    """The attach reader of a container that sent ``stream`` on stdout and ended."""
    from grader.sandbox.docker import _Attach

    reader = _Attach(sock, 1 << 20)
    reader.stream.feed(stream)
    reader.eof = True
    return reader


def test_only_a_stream_that_starts_with_the_bootstraps_self_test_counts() -> None:
    from grader.harness.docker_boot import INIT_LAYER
    from grader.harness.supervisor import frame
    from grader.sandbox.docker import _collected

    body = b"I" + record("import.json", b"{}") + b"H" + record("c1.json", b"{}") + b"E"
    layer_check = frame(b"T", json.dumps({"mode": "docker", "verified": [INIT_LAYER], "ok": True}).encode())
    not_init = frame(b"T", json.dumps({"mode": "docker", "verified": [], "ok": False}).encode())
    with socket.socket() as sock:
        outputs, frozen, _ = _collected(_reader(sock, layer_check + body))
        assert set(outputs) == {"import.json", "c1.json"} and frozen == {"import.json": b"{}"}
        outputs, frozen, log = _collected(_reader(sock, body))  # forged by some other process of the container
        assert outputs == {} and frozen is None and "layer check" in log
        with pytest.raises(SandboxError, match="not its PID 1"):
            _collected(_reader(sock, not_init + b"E"))


def test_bootstrap_is_valid_python_and_boots_the_bundle() -> None:
    source = bootstrap_source()
    compile(source, "<bootstrap>", "exec")
    assert "@" not in source.replace("@dataclass", "")
    assert "/opt/grader" in source and "harness.docker_boot" in source


def test_unreachable_engine_says_how_to_start_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("docker")
    from grader.errors import SandboxUnavailable
    from grader.sandbox.image import docker_client

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxUnavailable) as e:
        docker_client(timeout=5)
    assert "dockerd" in str(e.value) and "systemctl start docker" in str(e.value)


def test_docker_backend_without_engine_raises_unavailable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pytest.importorskip("docker")
    from grader.errors import SandboxUnavailable
    from grader.sandbox import make_sandbox

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(SandboxUnavailable):
        make_sandbox("docker")


@pytest.mark.parametrize("require", ["0", "1"])
def test_no_engine_skips_unless_ci_requires_docker(require: str, tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    pytest.importorskip("docker")
    here = Path(__file__).resolve()
    env = dict(os.environ, DOCKER_HOST=f"unix://{tmp_path}/no-engine.sock", GRADER_REQUIRE_DOCKER=require)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rsf",
         f"{here.parent / 'test_docker_backend.py'}::test_correct_submission_scores_full_marks_officially"],
        cwd=here.parents[2], env=env, capture_output=True, text=True, timeout=120)
    if require == "1":
        assert done.returncode != 0, done.stdout
        assert "GRADER_REQUIRE_DOCKER=1" in done.stdout
    else:
        assert done.returncode == 0, done.stdout
        assert "1 skipped" in done.stdout and "dockerd" in done.stdout
