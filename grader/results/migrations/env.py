"""Alembic environment of the grader's store; run through ``grader.results.database.migrate``."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine, text

from grader.results.schema import metadata

config = context.config
MIGRATION_LOCK = 0x67726164  # PostgreSQL advisory lock: one migrating process at a time


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        engine = create_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.connect() as conn:
            _run(conn)
        engine.dispose()
    else:
        _run(connection)


def _run(connection: object) -> None:
    context.configure(connection=connection, target_metadata=metadata,  # type: ignore[arg-type]
                      render_as_batch=True, compare_type=True)
    with context.begin_transaction():
        if connection.dialect.name == "postgresql":  # type: ignore[attr-defined]
            connection.execute(text(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK})"))  # type: ignore[attr-defined]
        context.run_migrations()


if context.is_offline_mode():
    raise SystemExit("offline (SQL script) migrations are not supported; run 'grader serve' or 'grader worker'")
run_migrations_online()
