"""Request bodies and validated identifiers of the HTTP API (pydantic; unknown fields refused)."""

from __future__ import annotations

import re
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from ..models import Visibility

SLUG = r"^[a-z0-9][a-z0-9_-]{0,63}$"
SUBMISSION_ID = r"^[0-9a-f]{32}$"
SLUG_RE, SUBMISSION_ID_RE = re.compile(SLUG), re.compile(SUBMISSION_ID)


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Policy(Body):
    """When students see what. ``checks`` overrides a check's visibility from the rubric;
    ``total`` says when the total score is released. A released ``after_due_date`` check is shown
    once the due date has passed; ``after_published`` once staff publish the results; ``hidden``
    never. An unreleased check shows only its id, title and points: no status, score or message."""

    checks: dict[str, Visibility] = Field(default_factory=dict)
    total: Visibility = "visible"


class RateLimit(Body):
    """At most ``count`` new submissions per student in any ``window_s`` seconds."""

    count: int = Field(default=10, ge=1, le=10_000)
    window_s: int = Field(default=3600, ge=1, le=30 * 86400)


class CourseIn(Body):
    slug: str = Field(pattern=SLUG)
    title: str = Field(min_length=1, max_length=200)


class AssignmentIn(Body):
    slug: str = Field(pattern=SLUG)
    title: str = Field(default="", max_length=200)
    rubric_toml: str | None = Field(default=None, max_length=1_000_000,
                                    description="a rubric file's text; default: the rubric of the assignment's module")
    module: str | None = Field(default=None, max_length=64,
                               description="the course module it grades (an installed unit's name, number or NN_name); "
                                           "default: the rubric's, else the only installed one")
    due_at: datetime | None = None
    published: bool = False
    policy: Policy = Policy()
    rate_limit: RateLimit = RateLimit()


class AssignmentPatch(Body):
    """Only the given fields change. A new ``rubric_toml`` takes effect for new gradings; regrade
    to apply it to existing submissions."""

    title: str | None = Field(default=None, max_length=200)
    rubric_toml: str | None = Field(default=None, max_length=1_000_000)
    due_at: datetime | None = None
    published: bool | None = None
    policy: Policy | None = None
    rate_limit: RateLimit | None = None


class OverrideIn(Body):
    score: float = Field(ge=0, le=1_000_000)
    reason: str = Field(min_length=3, max_length=2000)
