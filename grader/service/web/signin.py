"""Signing in and out: the sign-in form, this browser's sign-out, and a staff member's "sign out
everywhere"; the home page's redirect; the static files."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, HTTPException, Request
from fastapi.responses import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from ...results.tables import Staff, Student
from .. import deps, ops
from ..auth import authenticate
from ..deps import Csrf
from .pages import page, redirect, static_file
from .sessions import clear_session, end_session, local_path, session_claim, set_session, start_session

router = APIRouter(include_in_schema=False)


@router.get("/static/{name}")
def static(name: str) -> Response:
    return static_file(name)


@router.get("/")
def home(request: Request) -> Response:
    who = deps.browser_principal(request)
    return redirect("/signin" if who is None else "/staff" if who.staff else "/home")


@router.get("/signin")
def signin_form(request: Request, next: str = "") -> Response:
    return page(request, "signin.html", deps.browser_principal(request), next=local_path(next), error="")


@router.post("/signin")
def signin(request: Request, token: Annotated[str, Form(max_length=300)], csrf: Csrf,
           next: Annotated[str, Form(max_length=500)] = "") -> Response:
    deps.check_csrf(request, csrf)
    secret = deps.web_secret(request)

    def work(s: Session) -> str:
        who = authenticate(s, token.strip())
        row = s.scalar(select(Staff).where(Staff.name == who.name)) if who.staff else s.get(Student, who.student_pk)
        assert row is not None
        return start_session(s, secret, who.kind, row.id, row.token_hash)

    try:
        value = deps.run(request, work)
    except HTTPException:
        return page(request, "signin.html", None, status=401, next=local_path(next),
                    error="That sign-in token is not known. Paste the whole token you were given "
                          "(it starts with student_ or staff_).")
    response = redirect(local_path(next) or "/")
    set_session(response, request, value)
    return response


@router.post("/signout")
def signout(request: Request, csrf: Csrf) -> Response:
    """This browser's session ends in the store too: a copy of its cookie is dead."""
    deps.check_csrf(request, csrf)
    claim = session_claim(deps.web_secret(request), request)
    if claim is not None:
        deps.run(request, lambda s: end_session(s, claim))
    response = redirect("/signin")
    clear_session(response, request)
    return response


@router.post("/staff/signout-everywhere")
def signout_everywhere(request: Request, csrf: Csrf) -> Response:
    """Staff end every session of theirs, in every browser (this one too)."""
    deps.check_csrf(request, csrf)
    who = deps.signed_in(request, staff=True)
    deps.run(request, lambda s: ops.sign_out_staff(s, who.name))
    response = redirect("/signin")
    clear_session(response, request)
    return response
