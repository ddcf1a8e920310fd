"""Names and Role Provisioning Services: the course's members, read from the LMS, become its
students (learners) and its LTI users; the member list is followed across ``Link: rel=next`` pages."""

from __future__ import annotations

import re
from functools import partial
from typing import Any

import httpx2
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...errors import AddressRefused, LaunchRejected, PassbackError
from ...results.database import Database
from ...results.lti_tables import LtiContext
from ..ops import Invalid, audit
from .ags import SCOPE_NRPS, Tokens
from .config import LtiConfig, Platform
from .launch import ID, LIMITS, TEXT, is_staff, upsert_user
from .network import PlatformClients
from .registration import find_platform

MEMBERS_TYPE = "application/vnd.ims.lti-nrps.v2.membershipcontainer+json"


MAX_PAGES = 1000


def _members(url: str, token: str, http: httpx2.Client) -> list[dict[str, Any]]:
    """Every member of every page, each checked (``_member``); a page seen before ends the list."""
    members: list[dict[str, Any]] = []
    next_url: str | None = url
    seen: set[str] = set()
    while next_url and next_url not in seen and len(seen) < MAX_PAGES:
        seen.add(next_url)
        r = http.get(next_url, headers={"Authorization": f"Bearer {token}", "Accept": MEMBERS_TYPE})
        if r.status_code != 200:
            raise PassbackError(f"the membership service answered {r.status_code}: {r.text[:200]}")
        try:
            body = r.json()
        except (ValueError, RecursionError):  # not JSON, or nested too deeply for Python
            body = None
        page = body.get("members") if isinstance(body, dict) else None
        if not isinstance(page, list):
            raise PassbackError("the membership service's answer has no list of members")
        members.extend(_member(len(members) + i + 1, m) for i, m in enumerate(page))
        found = re.search(r'<([^>]+)>;\s*rel="?next"?', r.headers.get("link", ""))
        next_url = found.group(1) if found else None
    return members


def _member(number: int, member: Any) -> dict[str, Any]:
    """A member as the roster import reads it: a string user_id, a list of string roles, and
    string name, email and SIS id that fit their columns."""
    where = f"member {number} of the LMS roster"
    if not isinstance(member, dict) or not isinstance(member.get("user_id"), str) or not member["user_id"]:
        raise PassbackError(f"{where} has no user_id")
    if len(member["user_id"]) > LIMITS[ID]:
        raise PassbackError(f"{where} has a user_id longer than {LIMITS[ID]} characters")
    roles = member.get("roles", [])
    if not isinstance(roles, list) or not all(isinstance(r, str) for r in roles):
        raise PassbackError(f"{where} has roles that are not a list of strings")
    for name in ("name", "email", "lis_person_sourcedid", "status"):
        if not isinstance(member.get(name, ""), str) or len(member.get(name, "")) > LIMITS[TEXT]:
            raise PassbackError(f"{where} has a {name} that is not a string of at most {LIMITS[TEXT]} characters")
    return member


def _platform(session: Session, config: LtiConfig, issuer: str, client_id: str) -> Platform | None:
    return find_platform(session, config, issuer, client_id)


def sync_roster(db: Database, config: LtiConfig, tokens: Tokens, course_id: int, staff: str) -> dict[str, Any]:
    contexts = db.run(lambda s: list(s.scalars(select(LtiContext).where(LtiContext.course_id == course_id,
                                                                        LtiContext.memberships_url != ""))))
    if not contexts:
        raise Invalid("no LMS course with a membership service is linked to this course yet: launch it from the LMS "
                      "once first")
    counts = {"students": 0, "instructors": 0, "inactive": 0, "conflicts": 0}
    with PlatformClients(config.allow_private_networks) as clients:
        for ctx in contexts:
            platform = db.run(partial(_platform, config=config, issuer=ctx.issuer, client_id=ctx.client_id))
            if platform is None:
                continue
            http = clients.client(platform.registered)
            try:
                members = _members(ctx.memberships_url, tokens.get(db, platform, [SCOPE_NRPS], http), http)
            except (PassbackError, AddressRefused, httpx2.HTTPError) as e:
                raise Invalid(f"the LMS roster could not be read: {e}") from None

            def store(s: Any, ctx: LtiContext = ctx, members: list[dict[str, Any]] = members) -> None:
                for m in members:
                    if m.get("status", "Active") != "Active":
                        counts["inactive"] += 1
                        continue
                    role = "instructor" if is_staff(m.get("roles", [])) else "student"
                    try:
                        with s.begin_nested():
                            upsert_user(s, s.get_one(LtiContext, ctx.id), str(m["user_id"]), role,
                                        m.get("name", ""), m.get("email", ""), m.get("lis_person_sourcedid", ""))
                    except LaunchRejected:  # the id of a student linked to another LMS account
                        counts["conflicts"] += 1
                        continue
                    counts["students" if role == "student" else "instructors"] += 1
                audit(s, staff, "lti_roster_sync", str(course_id), counts)

            db.run(store)
    return counts
