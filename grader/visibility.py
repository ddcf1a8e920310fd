"""When a student may see a check, the way Gradescope defines its four visibility levels.

    visible          always shown
    hidden           never shown to students: not its status, not its points
    after_due_date   nothing until the due date has passed, then shown like a visible check
    after_published  nothing until scores are published, then shown like a visible check

The dates come from the rubric (``due_date``, ``publish_date``) or the command line
(``--due-date``, ``--publish-date``), the command line winning. Without a date, a check of that
level stays withheld. Staff views (``--staff``, the JSON report, the Gradescope export, which
Gradescope itself withholds) show everything; every student-facing output asks ``Release``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime, timezone

from .errors import DateError as DateError  # re-exported: callers of this module catch it
from .models import Visibility

UTC = timezone.utc  # noqa: UP017 (datetime.UTC is Python 3.11+; the student package runs on 3.10)


def parse_date(text: str, what: str = "date") -> datetime:
    """An ISO 8601 date or date-time (``2026-12-01``, ``2026-12-01T23:59``, with or without a
    zone; without one it is UTC). A bare date means the end of that day."""
    value = text.strip()
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            return datetime(day.year, day.month, day.day, 23, 59, 59, tzinfo=UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise DateError(f"{what} {text!r} is not a date; write it as 2026-12-01 or 2026-12-01T23:59:00+00:00") \
            from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Release:
    """What students may see now."""

    due_date: datetime | None = None
    publish_date: datetime | None = None
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def shows(self, visibility: Visibility) -> bool:
        if visibility == "visible":
            return True
        if visibility == "after_due_date":
            return self.due_date is not None and self.now >= self.due_date
        if visibility == "after_published":
            return self.publish_date is not None and self.now >= self.publish_date
        return False

    def to_meta(self) -> dict[str, str]:
        """The dates as stored with a batch's results (``now`` is not stored: it is read again)."""
        return {k: v.isoformat() for k, v in (("due_date", self.due_date), ("publish_date", self.publish_date))
                if v is not None}


def release_for(rubric_due: str | None = None, rubric_publish: str | None = None, *, due_date: str | None = None,
                publish_date: str | None = None, now: datetime | None = None) -> Release:
    """The release of the rubric's dates, overridden by the command line's; DateError names a bad one."""
    due = due_date or rubric_due
    publish = publish_date or rubric_publish
    return Release(parse_date(due, "due date") if due else None,
                   parse_date(publish, "publish date") if publish else None,
                   now or datetime.now(UTC))
