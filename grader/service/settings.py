"""The service's settings: from ``grader serve`` / ``grader worker`` options, else ``GRADER_*`` variables."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import GraderError
from ..load import LoadLimits
from ..results.database import sqlite_url


def default_data_dir() -> Path:
    return Path(os.environ.get("GRADER_DATA", "grader-data"))


@dataclass(frozen=True)
class Settings:
    """Everything a service process needs to know.

    ``broker`` empty: embedded mode (an in-process grading pool). ``database`` empty: SQLite in
    ``data_dir``. Timeouts are in seconds."""

    data_dir: Path = field(default_factory=default_data_dir)
    database: str = ""
    broker: str = ""
    backend: str = "local"  # the sandbox backend of this process's graders
    official: bool = True  # the local backend refuses to grade unless every isolation layer is verified
    workers: int = 2  # embedded pool threads, or a Celery worker's concurrency
    hostname: str = field(default_factory=lambda: f"grader@{socket.gethostname()}")
    max_upload_bytes: int = LoadLimits().max_bytes
    pending_timeout_s: float = 300.0  # grading this long on a live worker (a job it lost): the sweeper re-sends it
    sweep_interval_s: float = 2.0
    heartbeat_s: float = 5.0  # every worker (and the embedded pool) records that it is alive this often
    worker_lost_s: float = 15.0  # no heartbeat for this long: the worker is dead, its gradings are re-sent
    shutdown_grace_s: float = 30.0  # SIGTERM: gradings in progress get this long to finish, then are left
    visibility_timeout_s: float = 600.0  # Redis gives an unacknowledged job to another worker after this
    long_poll_max_s: float = 60.0
    poll_interval_s: float = 10.0  # long polls re-read the store this often; finished gradings wake them at once
    queue_per_assignment: int = 300  # uploads waiting to be graded (queued or grading): beyond, 503 Retry-After
    queue_total: int = 1000
    streams_per_student: int = 4  # open event streams and long polls of one person in one API process: beyond, 429
    streams_total: int = 1000  # of the whole API process
    header_timeout_s: float = 10.0  # a connection that sends no whole request head within this is closed

    @property
    def embedded(self) -> bool:
        return not self.broker

    @property
    def database_url(self) -> str:
        return self.database or sqlite_url(self.data_dir / "grader.sqlite")

    @classmethod
    def from_env(cls, **given: object) -> Settings:
        """Options given on the command line win; then GRADER_DATABASE_URL, GRADER_BROKER_URL and
        GRADER_<TIMEOUT> for each timeout field (``GRADER_PENDING_TIMEOUT_S=120``)."""
        env: dict[str, object] = {"database": os.environ.get("GRADER_DATABASE_URL", ""),
                                  "broker": os.environ.get("GRADER_BROKER_URL", "")}
        for name in TUNABLE:
            raw = os.environ.get(f"GRADER_{name.upper()}", "")
            if raw:
                try:
                    env[name] = float(raw)
                except ValueError:
                    raise GraderError(f"GRADER_{name.upper()}={raw!r} is not a number of seconds") from None
        for name in COUNTS:
            raw = os.environ.get(f"GRADER_{name.upper()}", "")
            if raw:
                if not raw.isdigit() or int(raw) < 1:
                    raise GraderError(f"GRADER_{name.upper()}={raw!r} is not a whole number of at least 1")
                env[name] = int(raw)
        values = {k: v for k, v in env.items() if v} | {k: v for k, v in given.items() if v is not None}
        return cls(**values)  # type: ignore[arg-type]


TUNABLE = ("pending_timeout_s", "sweep_interval_s", "heartbeat_s", "worker_lost_s", "shutdown_grace_s",
           "visibility_timeout_s", "long_poll_max_s", "poll_interval_s", "header_timeout_s")
COUNTS = ("queue_per_assignment", "queue_total", "streams_per_student", "streams_total")
