"""Argument types for the command line: a bad value is refused when the command line is read,
with argparse's one-line "error: argument --port: ..." and exit 2, never later as a traceback.
Only the standard library is imported until a value is checked."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def port(text: str) -> int:
    value = _int(text, "a TCP port")
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give a number from 0 to 65535 (8000, say)")
    return value


def at_least(minimum: int, what: str) -> Callable[[str], int]:
    def check(text: str) -> int:
        value = _int(text, what)
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: {what} must be at least {minimum}")
        return value

    check.__name__ = what  # argparse names the type in its messages
    return check


def name(text: str) -> str:
    if not text.strip() or len(text) > 64 or any(not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a name: give 1 to 64 printable characters (alice, say)")
    return text.strip()


def database_url(text: str) -> str:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(text)
    except (ArgumentError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a database URL: give postgresql://user:password@host/db "
                                         "or sqlite:////path/grader.sqlite") from None
    if url.get_backend_name() not in ("postgresql", "sqlite"):
        raise argparse.ArgumentTypeError(f"{text!r}: the service stores its data in PostgreSQL or SQLite "
                                         "(postgresql://... or sqlite:///...)")
    return text


BROKERS = ("redis", "rediss", "amqp", "pyamqp", "memory")


def broker_url(text: str) -> str:
    scheme, sep, rest = text.partition("://")
    if not sep or scheme not in BROKERS or (scheme != "memory" and not rest):
        raise argparse.ArgumentTypeError(f"{text!r} is not a broker URL: give redis://host:6379/0 (or "
                                         f"{', '.join(s + '://' for s in BROKERS[1:])})")
    return text


def date(text: str) -> str:
    """An ISO 8601 date, or "" (none: argparse passes a string default through the type too)."""
    from .visibility import DateError, parse_date

    if not text:
        return text
    try:
        parse_date(text)
    except DateError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number ({what})") from None


# What the student package (tinytorch-grader-student) leaves out, and why an option that asks for it is refused.
NOT_IN_STUDENT_PACKAGE = {
    "--hidden": "the hidden checks are not in the student package: they run only in the official grading",
    "--staff": "the student package has only the public checks, and shows each of them in full already",
    "--seed": "it seeds the inputs of the hidden checks, which are not in the student package",
    "--due-date": "the checks released after a date are not in the student package: they run only in the official "
                  "grading",
    "--publish-date": "the checks released after a date are not in the student package: they run only in the "
                      "official grading",
}


def refused(reason: str) -> type[argparse.Action]:
    """An argparse action that refuses its option, saying why (argparse's usage line, then
    "error: --hidden: ...", exit 2): for the options of the staff package that the student package has
    no use for, which its help leaves out."""

    class Refused(argparse.Action):
        def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                     option_string: str | None = None) -> None:
            parser.error(f"{option_string}: {reason}")

    return Refused


def backend(text: str) -> str:
    """A sandbox backend this package has: the student package refuses ``docker`` saying why."""
    from .edition import BACKENDS

    if text in BACKENDS:
        return text
    if text == "docker":
        raise argparse.ArgumentTypeError("'docker': the Docker sandbox is the official grading's, part of the staff "
                                         "package (tinytorch-grader); this package grades in the local sandbox: "
                                         "leave --backend out")
    raise argparse.ArgumentTypeError(f"{text!r} is not a backend: give {' or '.join(BACKENDS)}")
