"""What the API does to the store, without HTTP: courses, assignments, roster, submissions,
regrades and overrides. Each function works in the caller's transaction; every staff change
writes an audit row in the same transaction."""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import tempfile
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

from sqlalchemy import Integer, Select, bindparam, delete, func, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, object_session

from ..errors import Busy, GraderError
from ..errors import Conflict as Conflict  # the service's errors, re-exported for its modules
from ..errors import Invalid as Invalid
from ..errors import NotFound as NotFound
from ..errors import RateLimited as RateLimited
from ..errors import ServiceError as ServiceError
from ..models import shown
from ..results.names import is_safe
from ..results.roster import Roster
from ..results.tables import (
    Assignment,
    Audit,
    Course,
    Grading,
    Meta,
    Override,
    Staff,
    Student,
    Submission,
    UTCDateTime,
    WebSession,
    utcnow,
)
from ..rubric import Rubric, load_rubric
from .schemas import AssignmentIn, AssignmentPatch, CourseIn, Policy

SEED_SECRET_KEY = "service.seed_secret"


def stored_secret(session: Session, key: str) -> bytes:
    """A secret of the service kept in its store under ``key``: made once, on first use, by whichever
    replica gets there first (the others read that one)."""
    row = session.get(Meta, key)
    if row is None:
        try:
            with session.begin_nested():
                session.add(Meta(key=key, value=secrets.token_hex(32)))
        except IntegrityError:  # another replica made it first
            pass
        row = session.get_one(Meta, key)
    return row.value.encode()


def seed_secret(session: Session) -> bytes:
    """The course secret of the service's grading (grader.secret): GRADER_SEED_SECRET when set
    (refused if it is the public default), else the one in the store. Never shown to anyone."""
    from ..secret import environment_secret

    given = environment_secret()
    return given if given is not None else stored_secret(session, SEED_SECRET_KEY)

# ---- credentials -------------------------------------------------------------------------------


def new_token(kind: str) -> str:
    return f"{kind}_{secrets.token_urlsafe(32)}"


def token_hash(token: str) -> str:
    """Tokens are 256 random bits, so one SHA-256 is enough to store them (no slow hash needed)."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def add_staff(session: Session, name: str) -> str:
    """A new staff credential for ``name``; the token is returned once and stored hashed."""
    if session.scalar(select(Staff.id).where(Staff.name == name)) is not None:
        raise Conflict(f"staff member {name!r} exists already")
    token = new_token("staff")
    session.add(Staff(name=name, token_hash=token_hash(token)))
    audit(session, "grader", "add_staff", name)
    return token


def rotate_staff(session: Session, name: str) -> str:
    """A new credential for staff ``name``: the old one, and every browser session of theirs, stop
    working at once (a leaked or departed staff member's sign-in taken back)."""
    staff = session.scalars(select(Staff).where(Staff.name == name)).one_or_none()
    if staff is None:
        raise NotFound(f"no staff member {name!r}: --add-staff {name} makes one")
    token = new_token("staff")
    staff.token_hash = token_hash(token)
    end_person_sessions(session, "staff", staff.id)
    audit(session, "grader", "rotate_staff", name)
    return token


def end_person_sessions(session: Session, kind: str, pk: int | None) -> int:
    """Delete every browser session of a staff member or student (``web.sessions``)."""
    if pk is None:
        return 0
    done = session.execute(delete(WebSession).where(WebSession.kind == kind, WebSession.principal_pk == pk))
    return int(getattr(done, "rowcount", 0) or 0)


def sign_out_staff(session: Session, name: str) -> int:
    """Staff ``name`` signed out of every browser (their own doing, audited); the sessions ended.
    The pages' "Sign out everywhere" and ``DELETE /api/me/sessions``."""
    staff = session.scalars(select(Staff).where(Staff.name == name)).one()
    ended = end_person_sessions(session, "staff", staff.id)
    audit(session, name, "signout_everywhere", name, {"sessions": ended})
    return ended


def sign_out_student(session: Session, course: Course, student_id: str, staff: str) -> tuple[Student, int]:
    """One student signed out of every browser by ``staff`` (audited; their token stays good); the
    student and the sessions ended. The course page's button and the API's
    ``DELETE /api/courses/{course}/students/{student_id}/sessions``."""
    student = student_by_id(session, course, student_id)
    ended = end_person_sessions(session, "student", student.id)
    audit(session, staff, "signout_student", f"{course.slug}/{student.student_id}", {"sessions": ended})
    return student, ended


def audit(session: Session, actor: str, action: str, target: str, detail: object = "") -> None:
    text = detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True, default=str)
    session.add(Audit(actor=actor, action=action, target=target, detail=text))


# ---- courses and assignments -------------------------------------------------------------------


def create_course(session: Session, body: CourseIn, staff: str) -> Course:
    if session.scalar(select(Course.id).where(Course.slug == body.slug)) is not None:
        raise Conflict(f"course {body.slug!r} exists already")
    course = Course(slug=body.slug, title=body.title)
    session.add(course)
    audit(session, staff, "create_course", body.slug, body.model_dump())
    session.flush()
    return course


def course_by_slug(session: Session, slug: str) -> Course:
    course = session.scalar(select(Course).where(Course.slug == slug))
    if course is None:
        raise NotFound(f"no course {slug!r}")
    return course


def assignment_by_slug(session: Session, course: Course, slug: str) -> Assignment:
    found = session.scalar(select(Assignment).where(Assignment.course_id == course.id, Assignment.slug == slug))
    if found is None:
        raise NotFound(f"no assignment {slug!r} in course {course.slug!r}")
    return found


def create_assignment(session: Session, course: Course, body: AssignmentIn, staff: str) -> Assignment:
    if session.scalar(select(Assignment.id).where(Assignment.course_id == course.id,
                                                  Assignment.slug == body.slug)) is not None:
        raise Conflict(f"assignment {body.slug!r} exists already in course {course.slug!r}")
    rubric = parse_rubric(body.rubric_toml, body.module)
    _check_policy(body.policy, rubric)
    assignment = Assignment(
        course_id=course.id, slug=body.slug, title=body.title or rubric.title, rubric_json=rubric.model_dump_json(),
        rubric_hash=rubric.sha256, due_at=body.due_at, published=body.published,
        policy_json=body.policy.model_dump_json(), rate_limit_count=body.rate_limit.count,
        rate_limit_window_s=body.rate_limit.window_s)
    session.add(assignment)
    audit(session, staff, "create_assignment", f"{course.slug}/{body.slug}",
          body.model_dump(exclude={"rubric_toml"}) | {"module": rubric.module, "rubric": rubric.id, "rubric_hash": rubric.sha256})
    session.flush()
    return assignment


def update_assignment(session: Session, assignment: Assignment, body: AssignmentPatch, staff: str) -> Assignment:
    changes = body.model_dump(exclude_unset=True, exclude={"rubric_toml"})
    if body.rubric_toml is not None:
        rubric = parse_rubric(body.rubric_toml)
        assignment.rubric_json, assignment.rubric_hash = rubric.model_dump_json(), rubric.sha256
        changes["rubric_hash"] = rubric.sha256
    if "title" in changes and body.title is not None:
        assignment.title = body.title
    if "due_at" in changes:
        assignment.due_at = body.due_at
    if body.published is not None:
        assignment.published = body.published
    if body.policy is not None:
        _check_policy(body.policy, rubric_of(assignment))
        assignment.policy_json = body.policy.model_dump_json()
    if body.rate_limit is not None:
        assignment.rate_limit_count, assignment.rate_limit_window_s = body.rate_limit.count, body.rate_limit.window_s
    audit(session, staff, "update_assignment", str(assignment.id), changes)
    return assignment


def parse_rubric(toml_text: str | None, module: str | None = None) -> Rubric:
    """The rubric given as text (validated exactly as ``--rubric``), else the installed rubric of
    ``module`` (default: the only installed module). Invalid (422) names what is wrong: an unknown
    module, or several installed and none named, lists the installed ones."""
    from .. import modules
    from ..modules.choose import choose_module, find_unit
    from ..settings import settings

    installed, standing = modules.installed(), settings().module  # GRADER_MODULE: the machine's default
    if not module and toml_text is None and len(installed) > 1 and not standing:
        known = ", ".join(f"{u.name} ({u.number})" if u.number is not None else u.name for u in installed.values())
        raise Invalid(f"module: several course modules are installed ({known}): name the one this assignment grades "
                      "in its \"module\" field")
    try:
        unit = find_unit(module) if module else None
        if toml_text is None:
            return load_rubric(module=unit.name if unit else standing or choose_module(None, environ={}).name)
    except GraderError as e:
        raise Invalid(f"module: {e}") from None
    with tempfile.TemporaryDirectory(prefix="grader-rubric-") as folder:
        path = Path(folder) / "rubric.toml"
        path.write_text(toml_text, encoding="utf-8")
        try:
            rubric = load_rubric(path)
        except GraderError as e:
            raise Invalid(str(e).replace(str(path), "the rubric")) from None
    if unit is not None and rubric.module != unit.name:
        raise Invalid(f"the rubric grades course module {rubric.module!r}, the assignment names {unit.name!r}: give "
                      "one module")
    return rubric


def rubric_of(assignment: Assignment) -> Rubric:
    return Rubric.model_validate_json(assignment.rubric_json)


def policy_of(assignment: Assignment) -> Policy:
    return Policy.model_validate_json(assignment.policy_json)


def _check_policy(policy: Policy, rubric: Rubric) -> None:
    unknown = sorted(set(policy.checks) - {c.id for c in rubric.checks})
    if unknown:
        raise Invalid(f"the policy names checks the rubric does not have: {', '.join(unknown)}")


# ---- roster ----------------------------------------------------------------------------------------


def import_roster(session: Session, course: Course, roster: Roster, staff: str, *, rotate: bool = False,
                  hand_out: bool = True) -> tuple[list[dict[str, str]], list[str]]:
    """Add or update the roster's students. New students (and all, with ``rotate``) get a new
    credential, returned here once; the others keep theirs. Returns (credentials, problems).

    ``hand_out=False`` (the web pages): nobody is shown a credential here; those students get one
    nobody knows, and a sign-in sheet (``hand_out_sign_ins``) issues them one to hand out."""
    problems = list(roster.problems)
    issued: list[dict[str, str]] = []
    existing = {s.student_id: s for s in session.scalars(select(Student).where(Student.course_id == course.id))}
    for entry in roster.entries:
        if not is_safe(entry.student_id):
            problems.append(f"line {entry.line}: student id {shown(entry.student_id, one_line=True)!r} is not a safe "
                            "name; that student was not imported")
            continue
        fields = {k: v for k, v in asdict(entry).items() if k != "line"}
        student = existing.get(entry.student_id)
        if student is None or rotate:
            if student is None:
                student = Student(course_id=course.id, student_id=entry.student_id,
                                  token_hash=token_hash(new_token("student")))
                session.add(student)
            if hand_out:
                issued.append({"student_id": entry.student_id, "token": issue_token(student)})
            else:
                student.token_hash, student.token_issued_at = token_hash(new_token("student")), None
                end_person_sessions(session, "student", student.id)
        student.name, student.email, student.roster_json = entry.name, entry.email, json.dumps(fields, sort_keys=True)
    audit(session, staff, "import_roster", course.slug, {"students": len(roster.entries), "credentials": len(issued)})
    return issued, problems


def issue_token(student: Student) -> str:
    """A new credential for the student, to be handed out now: their old one, and every browser
    session signed in with it, stop working."""
    token = new_token("student")
    student.token_hash, student.token_issued_at = token_hash(token), utcnow()
    owner = object_session(student)
    if owner is not None:  # every browser signed in with the old token is signed out
        end_person_sessions(owner, "student", student.id)
    return token


def hand_out_sign_ins(session: Session, course: Course, staff: str, *, everyone: bool = False
                      ) -> list[tuple[Student, str]]:
    """New credentials for the course's students who were never handed one (every student, with
    ``everyone``), in student id order: the tokens are known only here, so each sheet issues them."""
    query = select(Student).where(Student.course_id == course.id)
    if not everyone:
        query = query.where(Student.token_issued_at.is_(None))
    chosen = [(student, issue_token(student)) for student in session.scalars(query.order_by(Student.student_id))]
    if chosen:
        audit(session, staff, "hand_out_sign_ins", course.slug, {"students": len(chosen), "everyone": everyone})
    return chosen


def student_by_id(session: Session, course: Course, student_id: str) -> Student:
    found = session.scalar(select(Student).where(Student.course_id == course.id, Student.student_id == student_id))
    if found is None:
        raise NotFound(f"no student {shown(student_id, one_line=True)!r} in course {course.slug!r}")
    return found


def rotate_token(session: Session, course: Course, student_id: str, staff: str) -> tuple[Student, str]:
    """One student's new credential (their old one stops working at once)."""
    student = student_by_id(session, course, student_id)
    token = issue_token(student)
    audit(session, staff, "rotate_token", f"{course.slug}/{student.student_id}")
    return student, token


# ---- submissions -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Queue:
    """How many uploads may wait to be graded (queued or grading), per assignment and in all."""

    per_assignment: int = 300
    total: int = 1000


REFUSED = "refuse_upload"  # the audit action of an upload refused as unreadable (it counts against the limit)
READING = "read_upload"  # an upload being read: it counts until it is accepted (removed) or refused (REFUSED)


def check_upload(session: Session, assignment: Assignment, student: Student, sha: str, queue: Queue
                 ) -> Submission | int:
    """Before an upload is read: the existing submission of this content (uploads are idempotent:
    its ``submitted_at`` is renewed), else, once the rate limit and the queue have room, the id of
    the attempt reserved for it. The reservation counts against the rate limit while the upload is
    read, so uploads sent at once, readable or not, never pass the limit together (the student's row
    is locked first, as in ``submit``); ``submit`` or ``refuse_upload`` settles it."""
    _lock(session, student)
    found, _ = _check(session, assignment, student, sha, queue)
    if found is not None:
        return found
    return int(session.execute(_reserve_statement(), {"actor": student.student_id, "at": utcnow(),
                                                      "target": _attempts_target(assignment, student)}).scalar_one())


@functools.cache
def _reserve_statement() -> Any:
    """An upload's reservation (built once; one statement, no ORM flush: it is on every upload)."""
    return insert(Audit).values(actor=bindparam("actor"), at=bindparam("at"), action=READING,
                                target=bindparam("target"), detail="").returning(Audit.id)


def release_upload(session: Session, attempt: int) -> None:
    """An attempt that was never read, through no fault of the student's (the readers were busy)."""
    session.execute(delete(Audit).where(Audit.id == attempt, Audit.action == READING))


def _lock(session: Session, student: Student) -> None:
    """Make concurrent uploads of one student wait for each other (a row lock on PostgreSQL, the
    write lock on SQLite) before they count."""
    session.execute(update(Student).where(Student.id == student.id).values(name=Student.name))


def _check(session: Session, assignment: Assignment, student: Student, sha: str, queue: Queue
           ) -> tuple[Submission | None, int]:
    """check_upload's answer, and how many uploads are queued (a new one's place is one more)."""
    since = utcnow() - timedelta(seconds=assignment.rate_limit_window_s)
    row = session.execute(_room_statement(), {"assignment": assignment.id, "student": student.id, "since": since,
                                              "target": _attempts_target(assignment, student), "sha": sha}).one()
    if row.existing is not None:
        found = session.get_one(Submission, row.existing)
        found.submitted_at = utcnow()
        return found, 0
    count = int(row.mine or 0) + int(row.refused or 0)
    oldest = min((at for at in (row.mine_oldest, row.refused_oldest) if at is not None), default=None)
    if count >= assignment.rate_limit_count:
        retry = int((oldest - since).total_seconds()) + 1 if oldest else assignment.rate_limit_window_s
        raise RateLimited(f"at most {assignment.rate_limit_count} uploads per {assignment.rate_limit_window_s} s "
                          f"for this assignment (refused ones count too); try again in {retry} s", retry_after=retry)
    waiting_here, total = int(row.waiting_here or 0), int(row.waiting or 0)
    if waiting_here >= queue.per_assignment or total >= queue.total:
        raise Busy(f"the grader has {max(waiting_here, total)} uploads waiting already and takes no more for now; "
                   "your file was not kept: upload it again in a minute (it does not count against your limit)",
                   retry_after=60)
    return None, int(row.queued or 0)


def refuse_upload(session: Session, assignment: Assignment, student: Student, reason: str,
                  attempt: int | None = None) -> None:
    """Record an upload refused as unreadable (its reserved ``attempt`` becomes the record): it
    counts against the student's rate limit as an accepted one does (else refused uploads would be
    a free oracle of what the reader accepts)."""
    if attempt is not None and session.execute(
            update(Audit).where(Audit.id == attempt, Audit.action == READING)
            .values(action=REFUSED, detail=reason[:500])).rowcount:  # type: ignore[attr-defined]
        return
    audit(session, student.student_id, REFUSED, _attempts_target(assignment, student), reason[:500])


class Submitted(NamedTuple):
    submission: Submission
    created: bool  # False: the student's earlier upload of the same content
    queue_place: int | None  # as queue_place() gives it


def submit(session: Session, assignment: Assignment, student: Student, file_name: str, content: bytes,
           queue: Queue = Queue(), attempt: int | None = None) -> Submitted:
    """The submission of this content by this student: the existing one (uploads are idempotent),
    or a new ``queued`` one, within the per-student rate limit and the queue's.

    The limit is atomic: the student's row is written first, which makes concurrent uploads of one
    student wait for each other (a row lock on PostgreSQL, the write lock on SQLite) before they count.
    The same lock orders two uploads of one file at once: the second finds the first's, so the
    insert needs no savepoint against the unique (assignment, student, content) constraint.
    ``attempt``, reserved by ``check_upload``, is settled: the new submission counts instead."""
    _lock(session, student)
    if attempt is not None:
        release_upload(session, attempt)
    sha = hashlib.sha256(content).hexdigest()
    found, queued = _check(session, assignment, student, sha, queue)
    if found is not None:
        return Submitted(found, False, queue_place(session, found))
    now = utcnow()
    sub = Submission(id=uuid.uuid4().hex, assignment_id=assignment.id, student_pk=student.id, sha256=sha,
                     file_name=file_name, content=content, status="queued", generation=1, created_at=now,
                     submitted_at=now, requested_at=now, enqueued_at=now)
    session.add(sub)
    session.flush()
    return Submitted(sub, True, queued + 1)  # every queued upload was requested before this one


def _attempts_target(assignment: Assignment, student: Student) -> str:
    return f"assignment {assignment.id} student {student.id}"


WAITING = ("queued", "grading")


@functools.cache
def _room_statement() -> Select[Any]:
    """What an upload is checked against, in one statement built once (building it costs more than
    running it): an earlier upload of the same file (``existing``), then the student's rate limit
    (accepted, refused and being read in the window), the queue's room and its length (``queued``,
    for a new upload's place). Parameters: ``assignment``,
    ``student``, ``sha``, ``since``, ``target``."""
    assignment, student = bindparam("assignment", type_=Integer), bindparam("student", type_=Integer)
    since = bindparam("since", type_=UTCDateTime)
    mine = (Submission.assignment_id == assignment) & (Submission.student_pk == student)
    recent = mine & (Submission.created_at > since)
    refused = (Audit.at > since) & Audit.action.in_((REFUSED, READING)) & (Audit.target == bindparam("target"))
    waiting = Submission.status.in_(WAITING)
    return select(
        select(func.count(Submission.id)).where(Submission.status == "queued").scalar_subquery().label("queued"),
        select(Submission.id).where(mine, Submission.sha256 == bindparam("sha")).scalar_subquery().label("existing"),
        select(func.count(Submission.id)).where(recent).scalar_subquery().label("mine"),
        select(func.min(Submission.created_at)).where(recent).scalar_subquery().label("mine_oldest"),
        select(func.count(Audit.id)).where(refused).scalar_subquery().label("refused"),
        select(func.min(Audit.at)).where(refused).scalar_subquery().label("refused_oldest"),
        select(func.count(Submission.id)).where(waiting, Submission.assignment_id == assignment)
        .scalar_subquery().label("waiting_here"),
        select(func.count(Submission.id)).where(waiting).scalar_subquery().label("waiting"))


def queue_place(session: Session, sub: Submission) -> int | None:
    """A queued upload's place in the queue (1: next to be graded), None once grading started."""
    if sub.status != "queued":
        return None
    ahead = session.scalar(select(func.count(Submission.id)).where(
        Submission.status == "queued", Submission.requested_at < sub.requested_at)) or 0
    return int(ahead) + 1


def statuses(session: Session, ids: list[str]) -> dict[str, object]:
    """The (status, generation) of each of these submissions that exists, in one query."""
    rows = session.execute(select(Submission.id, Submission.status, Submission.generation)
                           .where(Submission.id.in_(ids)))
    return {sid: (status, generation) for sid, status, generation in rows}


def started_in(session: Session, submission_id: str) -> int | None:
    """The assignment of this submission if it is grading now (its grading just started), else None."""
    row = session.execute(select(Submission.assignment_id, Submission.status)
                          .where(Submission.id == submission_id)).first()
    return row[0] if row is not None and row[1] == "grading" else None


def regrade(session: Session, sub: Submission, staff: str) -> Submission:
    """Ask for a new grading (the next generation); earlier results stay in the history."""
    now = utcnow()
    sub.generation += 1
    sub.status, sub.requested_at, sub.enqueued_at, sub.started_at, sub.finished_at = "queued", now, now, None, None
    audit(session, staff, "regrade", sub.id, {"generation": sub.generation})
    return sub


def latest_submissions(session: Session, assignment: Assignment) -> list[tuple[Submission, Student]]:
    """Each student's most recently submitted upload of the assignment (the one that counts)."""
    newest = (select(Submission.student_pk, func.max(Submission.submitted_at).label("at"))
              .where(Submission.assignment_id == assignment.id).group_by(Submission.student_pk).subquery())
    rows = session.execute(
        select(Submission, Student).join(Student, Student.id == Submission.student_pk)
        .join(newest, (newest.c.student_pk == Submission.student_pk) & (newest.c.at == Submission.submitted_at))
        .where(Submission.assignment_id == assignment.id).order_by(Student.student_id)).all()
    return [(s, st) for s, st in rows]


def students_without_upload(session: Session, assignment: Assignment) -> list[Student]:
    """The roster students of the assignment's course who uploaded nothing for it, by student id."""
    uploaded = select(Submission.student_pk).where(Submission.assignment_id == assignment.id)
    return list(session.scalars(select(Student).where(Student.course_id == assignment.course_id,
                                                      Student.id.not_in(uploaded)).order_by(Student.student_id)))


def add_override(session: Session, sub: Submission, score: float, reason: str, staff: str) -> Override:
    row = Override(submission_id=sub.id, score=score, reason=reason, staff=staff)
    session.add(row)
    audit(session, staff, "override", sub.id, {"score": score, "reason": reason})
    session.flush()
    return row


def history(session: Session, sub: Submission) -> tuple[list[Grading], list[Override]]:
    gradings = list(session.scalars(select(Grading).where(Grading.submission_id == sub.id)
                                    .order_by(Grading.generation)))
    overrides = list(session.scalars(select(Override).where(Override.submission_id == sub.id)
                                     .order_by(Override.created_at, Override.id)))
    return gradings, overrides


def remove_override(session: Session, sub: Submission, staff: str) -> Override | None:
    """Staff take back their override: the automatic score counts again (the override stays in the
    history, marked removed). None when no override stands."""
    standing = active_override(history(session, sub)[1])
    if standing is None:
        return None
    standing.removed_at, standing.removed_by = utcnow(), staff
    audit(session, staff, "remove_override", sub.id, {"score": standing.score})
    session.flush()
    return standing


def active_override(overrides: list[Override]) -> Override | None:
    """The newest override staff have not removed."""
    return next((o for o in reversed(overrides) if o.removed_at is None), None)


def effective(gradings: list[Grading], overrides: list[Override]) -> tuple[float | None, str]:
    """The score that counts, and where it comes from: a standing override (a staff decision holds
    through every regrade until staff remove it), else the newest grading."""
    override = active_override(overrides)
    if override is not None:
        return override.score, "override"
    grading = gradings[-1] if gradings else None
    if grading is not None:
        return grading.score, "grading"
    return None, "none"


def released(visibility: str, assignment: Assignment, now: datetime) -> bool:
    if visibility == "visible":
        return True
    if visibility == "after_due_date":
        return assignment.due_at is not None and now >= assignment.due_at
    if visibility == "after_published":
        return assignment.published
    return False
