"""The service's settings: from ``grader serve`` / ``grader worker`` options, else ``GRADER_*`` variables.

Each field says, once, what it means (``help``), and its option and variable: ``grader serve --help``,
``grader worker --help`` (``option_help``) and the settings table of docs/DEPLOY.md (``settings_table``,
checked by ``tests/service/test_settings.py``) are made from them. Only the standard library is
imported here: the command line is built from these fields before any command runs."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any

from ..errors import GraderError

UPLOAD_BYTES = 5 * 1024 * 1024  # grader.load.LoadLimits' default (a test keeps them equal)


def default_data_dir() -> Path:
    return Path(os.environ.get("GRADER_DATA", "grader-data"))


def setting(default: Any = MISSING, *, help: str, env: str = "", option: str = "", shown: str = "",
            factory: Callable[[], Any] | None = None) -> Any:
    """A field with its meaning (``help``, Markdown), its ``GRADER_*`` variable and its command-line
    option (several: ``"--workers / --concurrency"``), and its default as the docs say it (``shown``)."""
    metadata = {"help": help, "env": env, "option": option, "shown": shown}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True)
class ServiceSettings:
    """Everything a service process (``grader serve``, ``grader worker``) needs to know.

    ``broker`` empty: embedded mode (an in-process grading pool). ``database`` empty: SQLite in
    ``data_dir``. Timeouts are in seconds."""

    data_dir: Path = setting(factory=default_data_dir, option="--data", env="GRADER_DATA", shown="`./grader-data`",
                             help="data folder; the embedded SQLite file `grader.sqlite`")
    database: str = setting("", option="--database", env="GRADER_DATABASE_URL", shown="SQLite in the data folder",
                            help="SQLAlchemy URL (`postgresql://user:pw@host/db`)")
    broker: str = setting("", option="--broker", env="GRADER_BROKER_URL", shown="none: embedded",
                          help="Redis URL of the Celery queue (`redis://host:6379/0`)")
    backend: str = setting("local", option="--backend", help="sandbox backend of the graders: `local` or `docker`")
    official: bool = setting(True, option="--practice", shown="official",
                             help="`--practice`: grade on the local backend even where not every isolation layer "
                                  "can be verified (practice, not official grading)")
    workers: int = setting(2, option="--workers / --concurrency", shown="2 / the CPU count",
                           help="grading threads of the embedded `grader serve` (`--workers`), or jobs one "
                                "`grader worker` grades at once (`--concurrency`)")
    hostname: str = setting(factory=lambda: f"grader@{socket.gethostname()}", option="--hostname",
                            shown="`grader@<host name>`", help="the worker's name (in heartbeats and results)")
    max_upload_bytes: int = setting(UPLOAD_BYTES, help="the largest upload taken")
    pending_timeout_s: float = setting(300.0, env="GRADER_PENDING_TIMEOUT_S",
                                       help="grading this long on a live worker (a job it lost): the sweeper re-sends it")
    sweep_interval_s: float = setting(2.0, env="GRADER_SWEEP_INTERVAL_S",
                                      help="how often the API's sweeper looks for lost work")
    heartbeat_s: float = setting(5.0, env="GRADER_HEARTBEAT_S",
                                 help="every worker (and the embedded pool) records that it is alive this often")
    worker_lost_s: float = setting(15.0, env="GRADER_WORKER_LOST_S",
                                   help="a worker silent this long is dead: its gradings are re-sent")
    shutdown_grace_s: float = setting(30.0, env="GRADER_SHUTDOWN_GRACE_S",
                                      help="embedded `grader serve`: SIGTERM waits this long for the gradings in "
                                           "progress, then leaves them for the next start")
    visibility_timeout_s: float = setting(600.0, env="GRADER_VISIBILITY_TIMEOUT_S",
                                          help="Redis gives an unacknowledged job (a dead worker's) to another "
                                               "worker after this")
    long_poll_max_s: float = setting(60.0, env="GRADER_LONG_POLL_MAX_S", help="the cap of a long poll's `?wait=`")
    poll_interval_s: float = setting(10.0, env="GRADER_POLL_INTERVAL_S",
                                     help="the slow fallback while waiting: this often, one store read for all "
                                          "the waiting long polls, and each event stream's re-read of its queue "
                                          "place (a grading that finishes wakes its waiters at once, "
                                          "in-process embedded, Redis pub/sub scaled, with the final status it "
                                          "committed, so they answer without a store read; one that starts wakes the "
                                          "event streams, its own and those of its assignment's queued uploads, "
                                          "but not a long poll, which waits for the final status)")
    queue_per_assignment: int = setting(300, env="GRADER_QUEUE_PER_ASSIGNMENT",
                                        help="uploads waiting to be graded (queued or grading) per assignment; "
                                             "beyond, an upload is answered 503 with `Retry-After: 60` and kept "
                                             "nowhere")
    queue_total: int = setting(1000, env="GRADER_QUEUE_TOTAL", help="the same, in all assignments")
    streams_per_student: int = setting(4, env="GRADER_STREAMS_PER_STUDENT",
                                       help="open event streams and long polls of one person in one API process; "
                                            "beyond, 429 with `Retry-After: 15`")
    streams_total: int = setting(1000, env="GRADER_STREAMS_TOTAL",
                                 help="the same, of the whole API process; beyond, 503 with `Retry-After: 15`")
    header_timeout_s: float = setting(10.0, env="GRADER_HEADER_TIMEOUT_S",
                                      help="a connection that sends no whole request head within this (after it "
                                           "opens, or after its last response) is closed")

    @property
    def embedded(self) -> bool:
        return not self.broker

    @property
    def database_url(self) -> str:
        from ..results.database import sqlite_url

        return self.database or sqlite_url(self.data_dir / "grader.sqlite")

    @classmethod
    def from_env(cls, **given: object) -> ServiceSettings:
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


# ---- what the fields say, for --help and docs/DEPLOY.md ----------------------------------------------


def _default_text(f: Any) -> str:
    if f.metadata.get("shown"):
        return str(f.metadata["shown"])
    value = f.default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`" if isinstance(value, str) else str(value)


def _plain(markdown: str) -> str:
    return markdown.replace("`", "")


def option_help(name: str, *, default: str | None = None) -> str:
    """``--help`` for the option of field ``name``: its meaning, default and variable (``default``:
    what this command defaults to, where it differs from the field's)."""
    f = next(f for f in fields(ServiceSettings) if f.name == name)
    shown = _plain(default if default is not None else _default_text(f))
    env = f"; or ${f.metadata['env']}" if f.metadata.get("env") else ""
    return f"{_plain(f.metadata['help'])} (default {shown}{env})".replace("%", "%%")


def settings_table() -> str:
    """The settings table of docs/DEPLOY.md: each field with an option or a variable."""
    rows = ["| option / variable | default | meaning |", "|---|---|---|"]
    for f in fields(ServiceSettings):
        names = [f"`{n.strip()}`" for n in f.metadata.get("option", "").split("/") if n.strip()]
        names += [f"`{f.metadata['env']}`"] if f.metadata.get("env") else []
        if names:
            rows.append(f"| {' / '.join(names)} | {_default_text(f)} | {f.metadata['help']} |")
    return "\n".join(rows) + "\n"
