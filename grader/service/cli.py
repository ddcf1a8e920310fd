"""``grader serve`` and ``grader worker``. Only the standard library is imported until a command
runs: ``add_service_parsers`` is called every time the ``grader`` command line is built. The
options' help is the settings' own (``settings.option_help``)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from .. import cliargs
from .settings import option_help

EXIT_OK, EXIT_USAGE = 0, 2
SHUTDOWN_REQUESTS_S = 5
EXTRA_HINT = "the grading service needs its extra: pip install 'tinytorch-grader[service]'"


def add_service_parsers(subparsers: Any) -> None:
    serve = subparsers.add_parser(
        "serve", help="run the grading service (HTTP API; embedded graders on SQLite unless --broker is given)",
        description="Alone: the API, an in-process grading pool and SQLite in --data, nothing else. With --broker and "
                    "--database: the API only, for 'grader worker's on any number of hosts. Docs at /docs.")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=cliargs.port, default=8000)
    serve.add_argument("--add-staff", type=cliargs.name, metavar="NAME",
                       help="print a new staff credential for NAME and exit")
    serve.add_argument("--rotate-staff", type=cliargs.name, metavar="NAME",
                       help="print a new credential for the existing staff member NAME (their old one and every "
                            "browser they signed in stop working) and exit")
    _common(serve, broker_required=False)
    serve.add_argument("--workers", type=cliargs.at_least(1, "grading threads"), default=2,
                       help=option_help("workers", default="2"))
    worker = subparsers.add_parser("worker", help="grade jobs from the service's Celery queue (scaled-out mode)",
                                   description="Consume grading jobs from --broker and store results in --database. "
                                               "Run one per host; SIGTERM finishes the jobs in progress first.")
    _common(worker, broker_required=True)
    worker.add_argument("--concurrency", type=cliargs.at_least(1, "jobs graded at once"), default=os.cpu_count() or 1,
                        help=option_help("workers", default="the CPU count"))
    worker.add_argument("--hostname", default=None, help=option_help("hostname"))
    worker.add_argument("--pool", choices=["threads", "prefork", "solo"], default="threads")


def _common(p: argparse.ArgumentParser, *, broker_required: bool) -> None:
    p.add_argument("--data", type=Path, default=None, metavar="DIR", help=option_help("data_dir"))
    p.add_argument("--broker", required=broker_required and not os.environ.get("GRADER_BROKER_URL"),
                   type=cliargs.broker_url, default=None, metavar="URL", help=option_help("broker"))
    p.add_argument("--database", required=broker_required and not os.environ.get("GRADER_DATABASE_URL"),
                   type=cliargs.database_url, default=None, metavar="URL", help=option_help("database"))
    p.add_argument("--backend", choices=["local", "docker"], default="local", help=option_help("backend"))
    p.add_argument("--practice", action="store_true", help=option_help("official", default="official grading"))


def service_command(args: argparse.Namespace) -> int:
    try:
        import celery  # noqa: F401
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print(f"error: {EXTRA_HINT}", file=sys.stderr)
        return EXIT_USAGE
    from ..errors import GraderError
    from .settings import ServiceSettings

    if args.data is not None and (problem := _data_problem(args.data)):
        print(f"error: --data {args.data}: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if not args.practice:  # official grading never starts on the public default seed secret
        from ..secret import environment_secret

        try:
            environment_secret()
        except GraderError as e:
            print(f"error: {e}", file=sys.stderr)
            return EXIT_USAGE
    common = dict(data_dir=args.data, database=args.database, broker=args.broker, backend=args.backend,
                  official=not args.practice)
    try:
        if args.command == "worker":
            from .tasks import run_worker

            settings = ServiceSettings.from_env(**common, workers=args.concurrency, hostname=args.hostname)
            return run_worker(settings, pool=args.pool)
        settings = ServiceSettings.from_env(**common, workers=args.workers)
        if args.add_staff or args.rotate_staff:
            return _staff_credential(settings, args.add_staff, args.rotate_staff)
        return _serve(settings, args.host, args.port)
    except GraderError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_USAGE


def _data_problem(folder: Path) -> str | None:
    """Why the service could not keep its data in ``folder`` (None: it can, or can create it)."""
    if folder.exists() and not folder.is_dir():
        return "is a file, not a folder: give a folder for the service's data (it is created if missing)"
    target = folder if folder.exists() else next((p for p in folder.parents if p.exists()), Path("."))
    if not os.access(target, os.R_OK | os.W_OK | os.X_OK):
        return (f"{target} cannot be read and written by this user: give a folder it owns, or fix the "
                "permissions")
    return None


def _serve(settings: Any, host: str, port: int) -> int:
    import uvicorn

    from .app import create_app

    if os.geteuid() == 0 and not settings.embedded:
        print("warning: the API runs as root; run it as an unprivileged user (docs/DEPLOY.md)", file=sys.stderr)
    mode = "embedded: API + grading pool on SQLite" if settings.embedded else "API only, jobs to the Celery broker"
    print(f"grader serve: {mode}; data in {settings.data_dir.resolve()}; http://{host}:{port}/docs", flush=True)
    from .httpserver import protocol
    from .limits import raise_open_files

    raise_open_files()
    app = create_app(settings, announce=lambda line: print(line, flush=True))
    # keep-alive: an idle connection closes 5 s after its last response; one that sends no whole
    # request head within header_timeout_s is closed too (docs/DEPLOY.md: behind a reverse proxy).
    # SIGTERM: the port closes, requests in progress get SHUTDOWN_REQUESTS_S (an open long poll or
    # event stream is cut then: its client asks again), then the embedded pool finishes the
    # gradings in progress within GRADER_SHUTDOWN_GRACE_S and leaves the queue for the next start
    uvicorn.run(app, host=host, port=port, log_level="info", timeout_graceful_shutdown=SHUTDOWN_REQUESTS_S,
                timeout_keep_alive=5, http=protocol(settings.header_timeout_s))
    if getattr(getattr(app.state, "dispatcher", None), "abandoned_threads", 0):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(EXIT_OK)  # a grading thread past the grace: its result is not stored, the next start grades it
    return EXIT_OK


def _staff_credential(settings: Any, new: str | None, existing: str | None) -> int:
    """``--add-staff`` (a new staff member) or ``--rotate-staff`` (an existing one's new credential)."""
    from ..results.database import Database
    from . import ops

    name = new or str(existing)
    settings.data_dir.mkdir(parents=True, exist_ok=True)  # a first --add-staff, before any start
    db = Database(settings.database_url)
    db.migrate()
    try:
        token = db.run(lambda s: ops.add_staff(s, name) if new else ops.rotate_staff(s, name))
    finally:
        db.dispose()
    print(f"staff sign-in for {name} (shown once, keep it safe): Authorization: Bearer {token}")
    return EXIT_OK
