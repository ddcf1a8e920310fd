"""Course setup in the browser (staff only): create a course and its assignments, import the
roster, hand out the students' sign-ins (a CSV download or a printable sheet) and give one student
a new sign-in. Every change goes through ``ops``, exactly as the API's; every POST checks CSRF.

The grader stores only a hash of each sign-in token, so a token can be shown only when it is
issued: a sign-in sheet or CSV issues new tokens to the students it lists (by default those never
handed one) and their earlier ones stop working. A personal link carries the token after ``#``
(``/signin#token=…``): a fragment is never sent to the server, so it stays out of access logs and
``Referer`` headers; app.js moves it into the sign-in form and drops it from the address bar, and
the student still presses "Sign in" (a CSRF-checked POST), so opening a link changes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, get_args

from fastapi import APIRouter, File, Form, Query, Request, UploadFile
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from ... import modules
from ...export.base import csv_text
from ...models import Visibility
from ...modules import ModuleUnit
from ...results.roster import MAX_BYTES, RosterError, parse_roster
from ...results.tables import Assignment, Course, Student
from .. import deps, ops
from ..deps import Csrf, Slug
from ..schemas import AssignmentIn, CourseIn, Policy, RateLimit
from .pages import page

Text = Annotated[str, Form(max_length=400)]
VISIBILITIES: tuple[str, ...] = get_args(Visibility)
VISIBILITY_TEXT = {"visible": "shown at once", "after_due_date": "after the due date",
                   "after_published": "when you publish the results", "hidden": "never shown to students"}
SLUG_HELP = "use 1 to 64 lowercase letters, digits, '-' or '_', starting with a letter or digit"
LABELS = {"slug": "Short name", "title": "Title", "due_at": "Due", "count": "Uploads allowed",
          "total": "Total score shown"}
MAX_WINDOW_MIN = 30 * 24 * 60  # RateLimit's 30 days
CSV_HEADER = ("student_id", "name", "email", "token", "link")


def _problems(e: ValidationError) -> str:
    """A pydantic error as the form's own words: the field's label and what to change."""
    said = []
    for err in e.errors():
        where = ".".join(str(x) for x in err.get("loc", ()))
        label = LABELS.get(where, where or "form")
        said.append(f"{label}: {SLUG_HELP}" if err.get("type") == "string_pattern_mismatch"
                    else f"{label}: {err.get('msg', 'not valid')}")
    return "; ".join(said)


def _whole(text: str, label: str, default: int) -> int:
    text = text.strip()
    if not text:
        return default
    try:
        return int(text)
    except ValueError:
        raise ops.Invalid(f"{label}: write a whole number (got {text[:20]!r})") from None


def _due(text: str) -> datetime | None:
    """The due date from the form (``datetime-local``, read as UTC; an offset may be written)."""
    text = text.strip()
    if not text:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        raise ops.Invalid(f"Due: {text[:40]!r} is not a date and time; write it as 2026-10-01T23:59 (UTC), or "
                          "leave it empty for no due date") from None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _policy(total: str, checks: list[str], module: str) -> Policy:
    """The visibility choices of the chosen module's checks (each select's value is
    ``module/check=visibility``; the other modules' selects are left out)."""
    chosen: dict[str, str] = {}
    for value in checks:
        if not value:
            continue  # "as the rubric says"
        owner, _, choice = value.rpartition("/")
        if owner != module:
            continue  # a check of another module's rubric
        check, _, visibility = choice.partition("=")
        if visibility not in VISIBILITIES:
            raise ops.Invalid(f"Check visibility: {value[:80]!r} is not one of {', '.join(VISIBILITIES)}")
        chosen[check] = visibility
    try:
        return Policy.model_validate({"checks": chosen, "total": total or "visible"})
    except ValidationError as e:
        raise ops.Invalid(_problems(e)) from None


def assignment_body(form: dict[str, Any]) -> AssignmentIn:
    """The new-assignment form as the API's body, validated the same way."""
    count = _whole(form["rate_count"], "Uploads allowed", RateLimit().count)
    minutes = _whole(form["rate_minutes"], "Per how many minutes", RateLimit().window_s // 60)
    if not 1 <= minutes <= MAX_WINDOW_MIN:
        raise ops.Invalid(f"Per how many minutes: from 1 to {MAX_WINDOW_MIN} (30 days)")
    module = form["module"] or (next(iter(modules.installed())) if len(modules.installed()) == 1 else "")
    if not module:
        raise ops.Invalid("Course module: choose which module the assignment grades")
    policy = _policy(form["total"], form["checks"], module)
    due_at = _due(form["due"])
    try:
        return AssignmentIn(slug=form["slug"], title=form["title"], due_at=due_at, published=form["published"],
                            module=module, policy=policy, rate_limit=RateLimit(count=count, window_s=minutes * 60))
    except ValidationError as e:
        raise ops.Invalid(_problems(e)) from None


def course_page(session: Session, slug: str) -> dict[str, Any]:
    """What the course's setup page shows."""
    course = ops.course_by_slug(session, slug)
    assignments = list(session.scalars(select(Assignment).where(Assignment.course_id == course.id)
                                       .order_by(Assignment.slug)))
    students = list(session.scalars(select(Student).where(Student.course_id == course.id)
                                    .order_by(Student.student_id)))
    return {"course": course, "assignments": assignments, "students": students,
            "waiting": sum(1 for st in students if st.token_issued_at is None),
            "modules": [(unit, ops.parse_rubric(None, unit.name).checks) for unit in installed_units()],
            "visibilities": VISIBILITIES, "visibility_text": VISIBILITY_TEXT}


def installed_units() -> list[ModuleUnit]:
    """The course modules an assignment may grade, in the course's order."""
    return sorted(modules.installed().values(), key=lambda u: (u.number is None, u.number or 0, u.name))


def sign_in_rows(request: Request, issued: list[tuple[Student, str]]) -> list[dict[str, str]]:
    base = str(request.base_url).rstrip("/")
    return [{"student_id": st.student_id, "name": st.name, "email": st.email, "token": token,
             "link": f"{base}/signin#token={token}"} for st, token in issued]


def sign_ins_csv(slug: str, rows: list[dict[str, str]]) -> Response:
    """The CSV download (every cell through ``csv_text``: names are the roster's, never formulas)."""
    text = csv_text([CSV_HEADER, *([row[c] for c in CSV_HEADER] for row in rows)])
    return Response(text.encode("utf-8"), media_type="text/csv; charset=utf-8", headers={
        "Content-Disposition": f'attachment; filename="{slug}-sign-ins.csv"', "Cache-Control": "no-store",
        "X-Content-Type-Options": "nosniff"})


router = APIRouter(include_in_schema=False)


def course_view(request: Request, slug: str, *, status: int = 200, **extra: Any) -> Response:
    """The course's setup page, with what a form's answer adds (an error, a notice)."""
    who = deps.signed_in(request, staff=True)
    found: dict[str, Any] = deps.run(request, lambda s: course_page(s, slug))
    shown = {"form": {}, "error": "", "notice": "", "problems": [], "added": ""} | found | extra
    return page(request, "staff_course.html", who, status=status, **shown)


@router.get("/staff/courses")


def courses(request: Request) -> Response:
    who = deps.signed_in(request, staff=True)
    found = deps.run(request, lambda s: list(s.scalars(select(Course).order_by(Course.slug))))
    return page(request, "staff_courses.html", who, courses=found, form={}, error="")


@router.post("/staff/courses")


def create_course(request: Request, csrf: Csrf, slug: Text = "", title: Text = "") -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    form = {"slug": slug.strip(), "title": title.strip()}
    try:
        try:
            body = CourseIn(**form)
        except ValidationError as e:
            raise ops.Invalid(_problems(e)) from None
        deps.run(request, lambda s: ops.create_course(s, body, who.name))
    except (ops.Invalid, ops.Conflict) as e:
        found = deps.run(request, lambda s: list(s.scalars(select(Course).order_by(Course.slug))))
        return page(request, "staff_courses.html", who, status=e.status, courses=found, form=form, error=str(e))
    return RedirectResponse(f"/staff/courses/{body.slug}", status_code=303)


@router.get("/staff/courses/{course}")


def course(request: Request, course: Slug, added: Annotated[str, Query(max_length=64)] = "") -> Response:
    return course_view(request, course, added=added)  # the page says so if it names a new assignment


@router.post("/staff/courses/{course}/assignments")


def create_assignment(request: Request, course: Slug, csrf: Csrf, slug: Text = "", title: Text = "",
                      due: Text = "", total: Text = "", rate_count: Text = "", rate_minutes: Text = "",
                      published: Text = "", module: Text = "",
                      check: Annotated[list[str] | None, Form(max_length=200)] = None) -> Response:
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    form: dict[str, Any] = {"slug": slug.strip(), "title": title.strip(), "due": due.strip(), "total": total,
                            "rate_count": rate_count, "rate_minutes": rate_minutes,
                            "published": published == "on", "module": module.strip(), "checks": check or []}

    def work(s: Session) -> str:
        c = ops.course_by_slug(s, course)
        return ops.create_assignment(s, c, assignment_body(form), who.name).slug

    try:
        made = deps.run(request, work)
    except (ops.Invalid, ops.Conflict) as e:
        return course_view(request, course, status=e.status, form=form, error=f"The assignment was not created. "
                                                                              f"{e}")
    return RedirectResponse(f"/staff/courses/{course}?added={made}", status_code=303)


@router.post("/staff/courses/{course}/roster")
async def import_roster(request: Request, course: Slug, csrf: Csrf,
                        roster: Annotated[UploadFile | None, File()] = None) -> Response:
    deps.check_csrf(request, csrf)
    who = await run_in_threadpool(deps.signed_in, request, staff=True)
    raw = await roster.read(MAX_BYTES + 1) if roster is not None else b""
    try:
        if not raw:
            raise ops.Invalid("Choose a roster CSV file (a header row, then one student a line) to import.")
        if len(raw) > MAX_BYTES:
            raise ops.Invalid(f"The roster is larger than {MAX_BYTES // 2**20} MiB.")
        try:
            parsed = parse_roster(raw.decode("utf-8-sig"), source=(roster.filename if roster else "") or "roster")
        except UnicodeDecodeError as e:
            raise ops.Invalid(f"The roster is not UTF-8 (byte {e.start}); save it as 'CSV UTF-8' and import it "
                              "again.") from None
        except RosterError as e:
            raise ops.Invalid(f"The roster cannot be used: {e}") from None

        def work(s: Session) -> tuple[int, list[str]]:
            c = ops.course_by_slug(s, course)
            before = {st for st in s.scalars(select(Student.student_id).where(Student.course_id == c.id))}
            _none, problems = ops.import_roster(s, c, parsed, who.name, hand_out=False)
            s.flush()
            after = {st for st in s.scalars(select(Student.student_id).where(Student.course_id == c.id))}
            return len(after - before), problems

        new, problems = await run_in_threadpool(deps.run, request, work)
    except ops.Invalid as e:
        status, error = e.status, str(e)
        return await run_in_threadpool(lambda: course_view(request, course, status=status, error=error))
    notice = (f"Roster imported: {len(parsed.entries)} rows, {new} new students. Hand out their sign-ins below."
              if new else f"Roster imported: {len(parsed.entries)} rows, no new students.")
    return await run_in_threadpool(lambda: course_view(request, course, notice=notice, problems=problems))


@router.post("/staff/courses/{course}/sign-ins")


def hand_out(request: Request, course: Slug, csrf: Csrf, who: Text = "new", format: Text = "csv") -> Response:
    deps.check_csrf(request, csrf)
    staff = deps.signed_in(request, staff=True)
    if who not in ("new", "all") or format not in ("csv", "sheet"):
        return course_view(request, course, status=400, error="Choose whose sign-ins to hand out, then press "
                                                              "one of the two buttons.")

    def work(s: Session) -> tuple[Course, list[dict[str, str]]]:
        c = ops.course_by_slug(s, course)
        return c, sign_in_rows(request, ops.hand_out_sign_ins(s, c, staff.name, everyone=who == "all"))

    c, rows = deps.run(request, work)
    if not rows:
        return course_view(request, course, status=409, error="Every student has been handed a sign-in already "
                           "(they cannot be shown again). Choose 'every student' to issue new ones to all, or "
                           "give one student a new sign-in in the table.")
    if format == "csv":
        return sign_ins_csv(c.slug, rows)
    return page(request, "staff_sign_ins.html", staff, course=c, rows=rows, rotated=False)


@router.post("/staff/courses/{course}/rotate")


def rotate(request: Request, course: Slug, csrf: Csrf, student_id: Text = "") -> Response:
    deps.check_csrf(request, csrf)
    staff = deps.signed_in(request, staff=True)

    def work(s: Session) -> tuple[Course, list[dict[str, str]]]:
        c = ops.course_by_slug(s, course)
        return c, sign_in_rows(request, [ops.rotate_token(s, c, student_id, staff.name)])

    c, rows = deps.run(request, work)
    return page(request, "staff_sign_ins.html", staff, course=c, rows=rows, rotated=True)


@router.post("/staff/courses/{course}/signout")


def signout_student(request: Request, course: Slug, csrf: Csrf, student_id: Text = "") -> Response:
    """End every browser session of one student (their sign-in token stays good)."""
    deps.check_csrf(request, csrf)
    staff = deps.signed_in(request, staff=True)

    def work(s: Session) -> str:
        student, ended = ops.sign_out_student(s, ops.course_by_slug(s, course), student_id, staff.name)
        return f"{student.student_id} is signed out of {ended} browser session{'s' if ended != 1 else ''}."

    return course_view(request, course, notice=deps.run(request, work))

