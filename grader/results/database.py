"""Engines, sessions, migrations and retries for the one store (any SQLAlchemy URL).

SQLite (a file in the data folder) is the embedded default; PostgreSQL is the scaled-out one.
Schema changes happen only through Alembic (``migrations/``). Every unit of work goes through
``retrying``: a database that restarts or fails over costs a few retried attempts, not an error.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from ..errors import StoreUnavailable as StoreUnavailable  # re-exported for the service
from .tables import HEAD_REVISION

log = logging.getLogger("grader.service")
T = TypeVar("T")
MIGRATIONS = Path(__file__).with_name("migrations")


def sqlite_url(path: Path, *, readonly: bool = False) -> str:
    """The URL of a SQLite file; ``readonly``: opened read-only and, since a WAL store read where its
    folder cannot be written has no -shm file to share, as immutable (a snapshot)."""
    if readonly:
        return f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&immutable=1&uri=true"
    return f"sqlite:///{path.resolve()}"


def make_engine(url: str) -> Engine:
    """An engine that survives restarts (with ``retrying``: a stale pooled connection is replaced)."""
    if url.startswith("sqlite") and "mode=ro" in url:  # a store read where it may not be written
        return create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url.removeprefix("postgresql://")
    # no pool_pre_ping: it costs a round trip per unit of work; a pooled connection that a restart
    # made stale fails its first statement as a disconnect, which invalidates the pool, and
    # ``retrying`` runs the unit of work again on a fresh connection
    return create_engine(url, pool_size=10, max_overflow=20, pool_recycle=1800, connect_args={"connect_timeout": 5})


def _sqlite_pragmas(dbapi_connection: Any, _record: object) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (nothing to do, and no Alembic import, when
    it is there already). A store made by the hand-written batch store of older versions has the
    first revision's tables without Alembic's bookkeeping: it is stamped, then upgraded."""
    if current_revision(engine) == HEAD_REVISION:
        return
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        tables = set(inspect(connection).get_table_names())
        if "alembic_version" not in tables and {"results", "meta"} <= tables:
            command.stamp(config, "0001_batch_store")
        command.upgrade(config, "head")


def current_revision(engine: Engine) -> str | None:
    with engine.connect() as connection:
        if not inspect(connection).has_table("alembic_version"):
            return None
        row = connection.execute(text("SELECT version_num FROM alembic_version")).first()
    return str(row[0]) if row else None


class Database:
    """One engine and its session factory."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)
        self.sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def migrate(self) -> None:
        retrying(lambda: migrate(self.engine), attempts=20)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A session committed at the end of the block, rolled back on an exception."""
        with self.sessions() as session, session.begin():
            yield session

    def run(self, work: Callable[[Session], T], *, attempts: int = 10) -> T:
        """``work(session)`` in one transaction, retried from the start if the connection fails."""

        def once() -> T:
            with self.session() as session:
                return work(session)

        return retrying(once, attempts=attempts)

    def dispose(self) -> None:
        self.engine.dispose()


def retrying(action: Callable[[], T], *, attempts: int = 10, first_delay: float = 0.1) -> T:
    """Run ``action``; on a lost or refused connection wait (0.1, 0.2, 0.4 … 2 s: about 11 s in all
    with the default attempts) and try again.
    Other errors (constraint violations, bugs) are raised at once."""
    delay = first_delay
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except (OperationalError, DBAPIError) as e:
            if not _transient(e) or attempt == attempts:
                if _transient(e):
                    raise StoreUnavailable(f"the database is unreachable after {attempts} attempts: "
                                           f"{str(e.orig).splitlines()[0] if e.orig else e}") from e
                raise
            log.warning("database unavailable (attempt %d of %d): %s", attempt, attempts,
                        str(e.orig).splitlines()[0] if e.orig else e)
            time.sleep(delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


def _transient(e: DBAPIError) -> bool:
    """A lost, refused or busy connection (worth retrying), not a bad statement or a constraint."""
    if e.connection_invalidated:
        return True
    if not isinstance(e, OperationalError):
        return False
    message = str(e.orig or e).lower()
    return any(word in message for word in TRANSIENT)


TRANSIENT = ("locked", "busy", "connection", "connect", "server closed", "terminating", "shutting down", "starting up",
             "recovery mode", "timeout", "timed out", "refused", "could not receive", "ssl syscall", "broken pipe",
             "eof detected", "no route")
