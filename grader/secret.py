"""The course's seed secret: the key that makes the inputs of non-visible checks unpredictable.

With the planner and the probes (both in the student package), whoever knows the secret knows a
hidden check's inputs. The practice default is public (it ships in every wheel), so it is good for
practice runs only: official grading (batch, Gradescope mode, the service) refuses it and uses the
course's own secret instead:

- ``GRADER_SEED_SECRET``, when set (not to the public default);
- else the secret kept with the course's data, made on first use and never shown to students:
  ``grader batch`` keeps it in the results folder (``seed-secret``, mode 0600), the service in its
  database, the Gradescope autograder in its zip (``autograder/make_zip.sh`` makes one).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from .errors import GraderError, NoCourseSecret
from .settings import settings

PRACTICE_SECRET = b"tinytorch-grader"  # public: the seed of practice runs only
FILE = "seed-secret"
MAX_BYTES = 4096


def practice_secret() -> bytes:
    """The secret of a practice run: the course's, when this machine has it, else the public one."""
    return settings().seed_secret or PRACTICE_SECRET


def official(secret: bytes | None) -> bytes:
    """``secret`` if official grading may use it; NoCourseSecret (with the fix) if it is missing or
    the public default."""
    if not secret:
        raise NoCourseSecret("official grading needs the course's seed secret (the inputs of hidden checks are drawn "
                             "from it): set GRADER_SEED_SECRET to a long random string that students never see")
    if secret == PRACTICE_SECRET:
        raise NoCourseSecret("GRADER_SEED_SECRET is the grader's public default, which every student's package holds, "
                             "so the hidden checks' inputs could be predicted: set it to a long random string of the "
                             "course's own, or unset it to let the grader make one")
    return secret


def read_secret(path: Path) -> bytes:
    """The secret a file holds (at most MAX_BYTES + 1 read; surrounding white space dropped); OSError."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(fd, "rb") as f:
        return f.read(MAX_BYTES + 1).strip()


def environment_secret() -> bytes | None:
    """``GRADER_SEED_SECRET`` for official grading: None when it is unset, NoCourseSecret when it is
    the public default. It wins over every secret kept with a course's data."""
    given = settings().seed_secret
    return official(given) if given is not None else None


def for_official(given: bytes | None) -> bytes:
    """The secret an official grader uses: ``given`` (the course's own), else ``GRADER_SEED_SECRET``;
    NoCourseSecret with the fix when neither is there or it is the public default."""
    return official(given or settings().seed_secret)


def file_secret(path: Path) -> bytes | None:
    """The course secret for official grading from ``path`` when it holds one (Gradescope's
    ``source/seed_secret``), ``GRADER_SEED_SECRET`` winning; None when neither has one."""
    if (given := environment_secret()) is not None:
        return given
    try:
        value = read_secret(path)
    except OSError:
        return None
    return official(value) if value and len(value) <= MAX_BYTES else None


def folder_secret(folder: Path) -> bytes:
    """The course secret for official grading into ``folder``: ``GRADER_SEED_SECRET``, else the one
    kept in ``folder/seed-secret`` (made on first use, 0600, race-free). GraderError when it
    cannot be read or made there."""
    if (given := environment_secret()) is not None:
        return given
    path = folder / FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not path.exists():  # written whole, then linked into place: a reader never sees half of it
            made = folder / f".{FILE}.{os.getpid()}.{secrets.token_hex(4)}"
            fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            try:
                with os.fdopen(fd, "w", encoding="ascii") as f:
                    f.write(secrets.token_hex(32) + "\n")
                try:
                    os.link(made, path)
                except FileExistsError:
                    pass  # another batch made it first: that one is the course's
            finally:
                made.unlink(missing_ok=True)
        value = read_secret(path)
    except OSError as e:
        raise GraderError(f"the course's seed secret cannot be kept in {path} ({e.strerror or e}); give a folder "
                          "you can write to, or set GRADER_SEED_SECRET") from None
    if not value or len(value) > MAX_BYTES:
        raise GraderError(f"{path} does not hold a seed secret (empty or too long); delete it to make a new one, "
                          "or set GRADER_SEED_SECRET")
    return official(value)
