"""The web pages on the app: one router per kind of page, and a browser that is not signed in sent
to the sign-in page. Each page signs the browser in from its session cookie (``deps.signed_in``),
checks who may see what exactly as the API does (``auth.own_submission``, ``require_course``,
staff only), and renders a template; every POST checks its CSRF token first (``deps.check_csrf``)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ...errors import SignInFirst
from . import setup, signin, staff, student
from .pages import redirect

ROUTERS = (signin.router, student.router, staff.router, setup.router)


async def sign_in_first(request: Request, _e: Exception) -> Response:
    """A page asked for without a session: to the sign-in page, and back after; a script or a form
    POST gets 401."""
    if "application/json" in request.headers.get("accept", "") or request.method != "GET":
        return JSONResponse({"detail": "sign in first"}, status_code=401)
    return redirect(f"/signin?next={quote(request.url.path)}")


def mount_web(app: FastAPI) -> None:
    app.add_exception_handler(SignInFirst, sign_in_first)
    for router in ROUTERS:
        app.include_router(router)
