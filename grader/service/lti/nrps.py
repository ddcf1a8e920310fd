"""Names and Role Provisioning Services: the course's members, read from the LMS, become its
students (learners) and its LTI users; the member list is followed across ``Link: rel=next`` pages."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import httpx2
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...errors import PassbackError
from ..database import Database
from ..ops import Invalid, audit
from .ags import SCOPE_NRPS, Tokens
from .config import LtiConfig, Platform
from .launch import is_staff, upsert_user
from .models import LtiContext
from .registration import find_platform

MEMBERS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"


def _members(url: str, token: str, http: httpx2.Client) -> list[dict[str, Any]]:
    members: list[dict[str, Any]] = []
    next_url: str | None = url
    while next_url:
        r = http.get(next_url, headers={"Authorization": f"Bearer {token}", "Accept": MEMBERS_TYPE})
        if r.status_code != 200:
            raise PassbackError(f"the membership service answered {r.status_code}: {r.text[:200]}")
        members.extend(r.json().get("members", []))
        found = re.search(r'<([^>]+)>;\s*rel="?next"?', r.headers.get("link", ""))
        next_url = found.group(1) if found else None
    return members


def _platform(session: Session, config: LtiConfig, issuer: str, client_id: str) -> Platform | None:
    return find_platform(session, config, issuer, client_id)


def sync_roster(db: Database, config: LtiConfig, tokens: Tokens, course_id: int, staff: str) -> dict[str, Any]:
    contexts = db.run(lambda s: list(s.scalars(select(LtiContext).where(LtiContext.course_id == course_id,
                                                                        LtiContext.memberships_url != ""))))
    if not contexts:
        raise Invalid("no LMS course with a membership service is linked to this course yet: launch it from the LMS "
                      "once first")
    counts = {"students": 0, "instructors": 0, "inactive": 0}
    with httpx2.Client(timeout=15) as http:
        for ctx in contexts:
            platform = db.run(partial(_platform, config=config, issuer=ctx.issuer, client_id=ctx.client_id))
            if platform is None:
                continue
            try:
                members = _members(ctx.memberships_url, tokens.get(db, platform, [SCOPE_NRPS], http), http)
            except (PassbackError, httpx2.HTTPError) as e:
                raise Invalid(f"the LMS roster could not be read: {e}") from None

            def store(s: Any, ctx: LtiContext = ctx, members: list[dict[str, Any]] = members) -> None:
                for m in members:
                    if m.get("status", "Active") != "Active":
                        counts["inactive"] += 1
                        continue
                    role = "instructor" if is_staff(m.get("roles", [])) else "student"
                    upsert_user(s, s.get_one(LtiContext, ctx.id), str(m["user_id"]), role, m.get("name", ""),
                                m.get("email", ""), m.get("lis_person_sourcedid", ""))
                    counts["students" if role == "student" else "instructors"] += 1
                audit(s, staff, "lti_roster_sync", str(course_id), counts)

            db.run(store)
    return counts
