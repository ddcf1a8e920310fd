"""Assignment and Grade Services: every new grading of a student who launched from an LMS becomes
a ``lti_passbacks`` row, delivered (and redelivered with exponential backoff until the platform
takes it) by ``deliver_due``. A row is never deleted: a failed passback stays visible to staff and
is retried; a regrade makes a new row with a later timestamp. Also the OAuth 2 client-credentials
token (signed JWT assertion, cached until it expires) shared with NRPS."""

from __future__ import annotations

import logging
import secrets
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any, cast

import httpx2
import jwt
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from ...errors import AddressRefused, PassbackError
from ...results.database import Database
from ...results.lti_tables import PASSBACK_STATES, LtiContext, LtiLink, LtiPassback, LtiUser
from ...results.tables import Assignment, Grading, Override, Student, Submission, utcnow
from ..ops import active_override, effective, history, policy_of, released
from .checks import web_url
from .config import LtiConfig, Platform
from .keys import signing_key
from .launch import record
from .network import PlatformClients
from .registration import find_platform

log = logging.getLogger("grader.service.lti")
SCORE_TYPE = "application/vnd.ims.lis.v1.score+json"
LINEITEM_TYPE = "application/vnd.ims.lis.v2.lineitem+json"
SCOPE_SCORE = "https://purl.imsglobal.org/spec/lti-ags/scope/score"
SCOPE_LINEITEM = "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"
SCOPE_NRPS = "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"


# ---- tokens --------------------------------------------------------------------------------------


@dataclass
class _Token:
    value: str
    expires: float


class Tokens:
    """Access tokens per (platform, scopes), kept until 30 s before they expire."""

    def __init__(self) -> None:
        self._cache: dict[tuple[str, str, str], _Token] = {}
        self._lock = threading.Lock()
        self.requests = 0  # token requests made (tests check the cache with it)

    def get(self, db: Database, platform: Platform, scopes: list[str], http: httpx2.Client) -> str:
        key = (platform.issuer, platform.client_id, " ".join(sorted(scopes)))
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached.expires > time.time():
                return cached.value
        assertion = db.run(lambda s: client_assertion(s, platform))
        self.requests += 1
        r = http.post(platform.auth_token_url, data={
            "grant_type": "client_credentials", "client_assertion": assertion, "scope": key[2],
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"})
        if r.status_code != 200:
            raise PassbackError(f"token request to {platform.auth_token_url} answered {r.status_code}: {r.text[:200]}")
        token = _Token(*_token_of(r))
        with self._lock:
            self._cache[key] = token
        return token.value


def _token_of(r: httpx2.Response) -> tuple[str, float]:
    """The access token of a token answer, and when to stop using it (30 s before it expires)."""
    try:
        body = r.json()
        value, life = body["access_token"], float(body.get("expires_in", 3600))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        value, life = None, 0.0
    if not isinstance(value, str) or not value:
        raise PassbackError(f"the token endpoint's answer has no access token (a JSON object with a string "
                            f"access_token and a number expires_in): {r.text[:200]}")
    return value, time.time() + max(0.0, life - 30)


def client_assertion(session: Session, platform: Platform) -> str:
    key = signing_key(session)
    now = int(time.time())
    claims = {"iss": platform.client_id, "sub": platform.client_id, "aud": platform.assertion_audience,
              "iat": now, "exp": now + 300, "jti": secrets.token_urlsafe(16)}
    return jwt.encode(claims, key.private_pem, algorithm="RS256", headers={"kid": key.kid})


# ---- making passback rows ---------------------------------------------------------------------


def enqueue_passbacks(session: Session) -> int:
    """A row for each new score of an LMS-launched student: a grading (status graded) or a staff
    override. Only the score that counts is sent: the effective score (newest of the latest grading
    and the latest override) of the student's latest submission; others become ``superseded``."""
    made = 0
    for source, sub, link, user in _new_scores(session):
        grading_id = source.id if isinstance(source, Grading) else None
        override_id = source.id if isinstance(source, Override) else None
        score, maximum = _score_of(session, sub, source)
        counts = score is not None and _latest_submission(session, sub) == sub.id
        last = session.scalar(select(func.max(LtiPassback.timestamp)).where(LtiPassback.link_pk == link.id,
                                                                            LtiPassback.user_pk == user.id))
        at = _at(source)
        stamp = at if last is None else max(at, last + timedelta(milliseconds=1))
        session.add(LtiPassback(grading_id=grading_id, override_id=override_id, link_pk=link.id, user_pk=user.id,
                                state="pending" if counts else "superseded", score_given=score,
                                score_maximum=maximum, timestamp=stamp, next_attempt_at=utcnow(),
                                last_error="" if counts else "not the score that counts (a later submission, "
                                                             "grading or override replaced it)"))
        made += counts
    session.flush()
    return made + _after_removed_overrides(session)


def _after_removed_overrides(session: Session) -> int:
    """A removed override is not sent (a row still pending becomes superseded), and the grading that
    counts again is: its superseded row is sent after all, with a timestamp after the override's."""
    revived = 0
    for row, override in session.execute(
            select(LtiPassback, Override).join(Override, Override.id == LtiPassback.override_id)
            .where(Override.removed_at.is_not(None), LtiPassback.state.in_(("pending", "held", "failed")))).all():
        row.state, row.last_error = "superseded", f"the override was removed by {override.removed_by}"
    for row, grading, sub in session.execute(
            select(LtiPassback, Grading, Submission).join(Grading, Grading.id == LtiPassback.grading_id)
            .join(Submission, Submission.id == Grading.submission_id)
            .join(Override, Override.submission_id == Submission.id)
            .where(LtiPassback.state == "superseded", Override.removed_at.is_not(None)).distinct()).all():
        score, maximum = _score_of(session, sub, grading)
        if score is None or _latest_submission(session, sub) != sub.id:
            continue
        last = session.scalar(select(func.max(LtiPassback.timestamp)).where(LtiPassback.link_pk == row.link_pk,
                                                                            LtiPassback.user_pk == row.user_pk))
        now = utcnow()
        row.state, row.score_given, row.score_maximum, row.last_error = "pending", score, maximum, ""
        row.timestamp = now if last is None else max(now, last + timedelta(milliseconds=1))
        row.next_attempt_at = now
        revived += 1
    session.flush()
    return revived


def _new_scores(session: Session) -> list[tuple[Grading | Override, Submission, LtiLink, LtiUser]]:
    """Gradings and overrides of LMS-launched students that have no passback row yet, oldest first."""
    found: list[tuple[Grading | Override, Submission, LtiLink, LtiUser, datetime]] = []
    for model, column, when in ((Grading, LtiPassback.grading_id, Grading.finished_at),
                                (Override, LtiPassback.override_id, Override.created_at)):
        query = (select(model, Submission, LtiLink, LtiUser)
                 .join(Submission, Submission.id == model.submission_id)
                 .join(LtiUser, LtiUser.student_pk == Submission.student_pk)
                 .join(LtiLink, (LtiLink.assignment_id == Submission.assignment_id)
                       & (LtiLink.context_pk == LtiUser.context_pk))
                 .outerjoin(LtiPassback, (column == model.id) & (LtiPassback.link_pk == LtiLink.id)
                            & (LtiPassback.user_pk == LtiUser.id))
                 .where(LtiPassback.id.is_(None)).order_by(when))
        if model is Grading:
            query = query.where(Grading.status == "graded")
        for src, sub, link, user in session.execute(query).all():
            source = cast(Grading | Override, src)
            found.append((source, sub, link, user, _at(source)))
    found.sort(key=lambda row: row[4])
    return [(src, sub, link, user) for src, sub, link, user, _at in found]


def _at(source: Grading | Override) -> datetime:
    return source.finished_at if isinstance(source, Grading) else source.created_at


def _score_of(session: Session, sub: Submission, source: Grading | Override) -> tuple[float | None, float | None]:
    """(scoreGiven, scoreMaximum) if ``source`` is the submission's effective score now, else (None, max)."""
    gradings, overrides = history(session, sub)
    newest = [g for g in gradings if g.status == "graded"]
    maximum = newest[-1].max_score if newest else None
    score, origin = effective(newest, overrides)
    current = active_override(overrides) if origin == "override" else newest[-1] if origin == "grading" else None
    if current is None or type(current) is not type(source) or current.id != source.id:
        return None, maximum
    return score, maximum


def _latest_submission(session: Session, sub: Submission) -> str | None:
    return session.scalar(select(Submission.id).where(Submission.assignment_id == sub.assignment_id,
                                                      Submission.student_pk == sub.student_pk)
                          .order_by(Submission.submitted_at.desc(), Submission.created_at.desc()).limit(1))


@dataclass(frozen=True)
class Due:
    passback_id: int
    platform: Platform
    lineitem_url: str
    lineitems_url: str
    link_pk: int
    resource_link_id: str
    label: str
    body: dict[str, Any]


def _due(session: Session, config: LtiConfig, now: datetime) -> list[Due]:
    due: list[Due] = []
    rows = session.execute(
        select(LtiPassback, LtiLink, LtiUser, LtiContext, Submission, Assignment)
        .join(LtiLink, LtiLink.id == LtiPassback.link_pk).join(LtiUser, LtiUser.id == LtiPassback.user_pk)
        .join(LtiContext, LtiContext.id == LtiLink.context_pk)
        .outerjoin(Grading, Grading.id == LtiPassback.grading_id)
        .outerjoin(Override, Override.id == LtiPassback.override_id)
        .join(Submission, Submission.id == func.coalesce(Grading.submission_id, Override.submission_id))
        .join(Assignment, Assignment.id == Submission.assignment_id)
        .where(LtiPassback.state.in_(("pending", "held", "failed")), LtiPassback.next_attempt_at <= now)
        .order_by(LtiPassback.timestamp)).all()
    for pb, link, user, ctx, sub, assignment in rows:
        newer = session.scalar(select(LtiPassback.id).where(LtiPassback.link_pk == pb.link_pk,
                                                            LtiPassback.user_pk == pb.user_pk,
                                                            LtiPassback.timestamp > pb.timestamp,
                                                            LtiPassback.state == "sent"))
        if newer is not None:  # a later score is in the gradebook already: this one would be refused as older
            pb.state, pb.last_error = "superseded", "a later score was sent first"
            continue
        if not released(policy_of(assignment).total, assignment, now):
            pb.state, pb.last_error = "held", "the total is not released to students yet (assignment policy)"
            continue
        platform = find_platform(session, config, ctx.issuer, ctx.client_id)
        if platform is None:
            pb.state, pb.last_error = "failed", f"platform {ctx.issuer!r} is no longer registered"
            continue
        body = {"userId": user.sub, "scoreGiven": pb.score_given, "scoreMaximum": pb.score_maximum,
                "timestamp": pb.timestamp.isoformat(timespec="milliseconds"), "activityProgress": "Completed",
                "gradingProgress": "FullyGraded", "submission": {"submittedAt": sub.submitted_at.isoformat(
                    timespec="milliseconds")}}
        due.append(Due(pb.id, platform, link.lineitem_url, ctx.lineitems_url, link.id, link.resource_link_id,
                       assignment.title or assignment.slug, body))
    return due


def scores_url(lineitem_url: str) -> str:
    base, sep, query = lineitem_url.partition("?")
    return f"{base.rstrip('/')}/scores{sep}{query}"


def _lineitem(db: Database, item: Due, tokens: Tokens, http: httpx2.Client) -> str:
    """The launch's line item, or one created (once) in the context's line items."""
    if item.lineitem_url:
        return item.lineitem_url
    if not item.lineitems_url:
        raise PassbackError("the launch had no line item and the platform offers no line items service")
    token = tokens.get(db, item.platform, [SCOPE_LINEITEM, SCOPE_SCORE], http)
    r = http.post(item.lineitems_url, headers={"Authorization": f"Bearer {token}", "Content-Type": LINEITEM_TYPE},
                  json={"scoreMaximum": item.body["scoreMaximum"], "label": item.label,
                        "resourceLinkId": item.resource_link_id, "resourceId": f"grader-{item.link_pk}"})
    if r.status_code not in (200, 201):
        raise PassbackError(f"creating the line item answered {r.status_code}: {r.text[:200]}")
    try:
        url = r.json()["id"]
    except (ValueError, KeyError, TypeError, RecursionError):
        url = None
    if not isinstance(url, str) or not web_url(url):
        raise PassbackError(f"the line item the platform made has no http(s) URL as its id: {r.text[:200]}")
    db.run(lambda s: setattr(s.get_one(LtiLink, item.link_pk), "lineitem_url", url))
    return url


class _HasIt(Exception):
    """409: the LMS holds a score for this student and line item with this timestamp or a later one
    (an earlier try of ours that did arrive, or a grade entered in the LMS): sending again cannot help."""


def _send(db: Database, item: Due, tokens: Tokens, http: httpx2.Client) -> None:
    lineitem = _lineitem(db, item, tokens, http)
    token = tokens.get(db, item.platform, [SCOPE_LINEITEM, SCOPE_SCORE], http)
    r = http.post(scores_url(lineitem), json=item.body,
                  headers={"Authorization": f"Bearer {token}", "Content-Type": SCORE_TYPE})
    if r.status_code == 409:
        raise _HasIt()
    if r.status_code not in (200, 201, 202, 204):
        raise PassbackError(f"the platform answered {r.status_code}: {r.text[:200]}")



def deliver_due(db: Database, config: LtiConfig, tokens: Tokens, http: httpx2.Client | None = None) -> int:
    """Make rows for new gradings, then send every due one. Returns how many were delivered."""
    db.run(enqueue_passbacks)
    items = db.run(lambda s: _due(s, config, utcnow()))
    delivered = 0
    with PlatformClients(config.allow_private_networks, http) as clients:
        for item in items:
            try:
                _send(db, item, tokens, clients.client(item.platform.registered))
            except _HasIt:
                db.run(partial(_had_it, item=item))
                continue
            except (PassbackError, AddressRefused, httpx2.HTTPError, KeyError, ValueError) as e:
                db.run(partial(_failed, config=config, item=item, error=e))
                continue
            db.run(partial(_sent, item=item))
            delivered += 1
    return delivered


def _sent(session: Session, item: Due) -> None:
    pb = session.get_one(LtiPassback, item.passback_id)
    pb.state, pb.sent_at, pb.attempts, pb.last_error = "sent", utcnow(), pb.attempts + 1, ""


def _had_it(session: Session, item: Due) -> None:
    pb = session.get_one(LtiPassback, item.passback_id)
    pb.attempts += 1
    if pb.attempts > 1:  # a try that failed on our side had arrived: the idempotent resend is refused
        pb.state, pb.sent_at, pb.last_error = "sent", utcnow(), "the LMS had this score already (an earlier try arrived)"
    else:
        pb.state, pb.last_error = "superseded", "the LMS holds a newer score for this student (entered in the LMS?)"
        record(session, "passback_refused", item.platform.issuer,
               f"passback {pb.id}: the LMS answered 409, it has a score with this or a later timestamp")


def _failed(session: Session, config: LtiConfig, item: Due, error: Exception) -> None:
    pb = session.get_one(LtiPassback, item.passback_id)
    pb.attempts += 1
    delay = min(config.passback_base_delay_s * 2 ** (pb.attempts - 1), config.passback_max_delay_s)
    pb.state, pb.last_error = "failed", f"{type(error).__name__}: {error}"[:1000]
    pb.next_attempt_at = utcnow() + timedelta(seconds=delay)
    record(session, "passback_failed", item.platform.issuer,
           f"passback {pb.id} (attempt {pb.attempts}, next in {delay:.0f} s): {pb.last_error}")


class PassbackLoop:
    """``deliver_due`` every ``interval_s`` in a background thread."""

    def __init__(self, db: Database, config: LtiConfig, tokens: Tokens, interval_s: float = 5.0) -> None:
        self.db, self.config, self.tokens, self.interval_s = db, config, tokens, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="lti-passback")

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                deliver_due(self.db, self.config, self.tokens)
            except Exception:
                log.exception("lti passback: this round failed; the next one retries")

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)


# ---- what staff see ------------------------------------------------------------------------------


def passback_panel(session: Session, assignment_id: int) -> dict[str, Any] | None:
    """The LMS gradebook side of one assignment for its staff dashboard: passbacks by state, and
    every one not delivered yet (who, what, how many tries, the last error, the next try); None
    when no LMS link points at the assignment."""
    links = list(session.scalars(select(LtiLink.id).where(LtiLink.assignment_id == assignment_id)))
    if not links:
        return None
    counts = dict(session.execute(select(LtiPassback.state, func.count()).where(LtiPassback.link_pk.in_(links))
                                  .group_by(LtiPassback.state)).all())
    waiting = session.execute(
        select(LtiPassback, LtiUser, Student).join(LtiUser, LtiUser.id == LtiPassback.user_pk)
        .outerjoin(Student, Student.id == LtiUser.student_pk)
        .where(LtiPassback.link_pk.in_(links), LtiPassback.state.in_(("pending", "held", "failed")))
        .order_by(LtiPassback.state, LtiPassback.next_attempt_at).limit(200)).all()
    return {"links": len(links), "counts": {state: int(counts.get(state, 0)) for state in PASSBACK_STATES},
            "waiting": [{"student": st.student_id if st else user.name or user.sub, "state": pb.state,
                         "score": pb.score_given, "of": pb.score_maximum, "attempts": pb.attempts,
                         "error": pb.last_error, "next": pb.next_attempt_at} for pb, user, st in waiting]}
