"""Real Redis and PostgreSQL servers for the service tests: Debian's binaries, on 127.0.0.1 and a
free port, data under /tmp/svc-*, started and stopped by pid (never by name), restartable on the
same port so that tests can take them away and bring them back."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_port(port: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def stop_pid(proc: subprocess.Popen[bytes] | None, sig: int = signal.SIGTERM, timeout: float = 20) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(sig)
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)


# ---- Redis ---------------------------------------------------------------------------------------


def redis_binary() -> str | None:
    return shutil.which("redis-server") or next(iter(glob.glob("/usr/bin/redis-server")), None)


class RedisServer:
    def __init__(self) -> None:
        binary = redis_binary()
        assert binary is not None
        self.binary, self.port = binary, free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="svc-redis-", dir="/tmp"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.proc = subprocess.Popen(
            [self.binary, "--bind", "127.0.0.1", "--port", str(self.port), "--dir", str(self.dir), "--save", "",
             "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "yes", "--daemonize", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(self.port)
        return self

    def stop(self) -> None:
        stop_pid(self.proc)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---- PostgreSQL ----------------------------------------------------------------------------------


def postgres_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


class PostgresServer:
    """A throw-away cluster (trust auth on 127.0.0.1 only, fsync off). As root it runs as the
    ``postgres`` user, which PostgreSQL requires."""

    def __init__(self) -> None:
        bindir = postgres_bindir()
        assert bindir is not None
        self.bindir, self.port = bindir, free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="svc-pg-", dir="/tmp"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.dir, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        subprocess.run([*self.as_user, str(bindir / "initdb"), "-D", str(self.dir / "data"), "-U", "grader",
                        "-A", "trust", "-E", "UTF8", "--no-sync"], check=True, capture_output=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://grader@127.0.0.1:{self.port}/{database}"

    def start(self) -> PostgresServer:
        self.proc = subprocess.Popen(
            [*self.as_user, str(self.bindir / "postgres"), "-D", str(self.dir / "data"), "-p", str(self.port),
             "-h", "127.0.0.1", "-k", str(self.dir), "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=300"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        wait_port(self.port)
        self._wait_ready()
        return self

    def _wait_ready(self, timeout: float = 20) -> None:
        import psycopg

        deadline = time.monotonic() + timeout
        while True:
            try:
                psycopg.connect(self.url(), connect_timeout=2).close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def create_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """A fast shutdown: SIGINT to the postmaster's pid (from postmaster.pid; runuser does not
        forward signals), then wait for it to exit. Clients are disconnected."""
        pid_file = self.dir / "data" / "postmaster.pid"
        if self.proc is not None and pid_file.is_file():
            pid = int(pid_file.read_text().split()[0])
            os.kill(pid, signal.SIGINT)
            deadline = time.monotonic() + 30
            while pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        stop_pid(self.proc)
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
