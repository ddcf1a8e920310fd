"""Rendering a page: the shared Jinja2 environment (``grader.feedback.templating``, autoescaped),
the security headers every page carries, and the static files (one script, one stylesheet)."""

from __future__ import annotations

from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from ...feedback.templating import render
from ...feedback.view import RELEASE, STATUS_TEXT
from ..deps import web_secret

if TYPE_CHECKING:
    from ..auth import Principal

# No inline script or style anywhere: app.js and web.css are the only code; pictures are data: PNGs.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY", "Cache-Control": "no-store",
}
# name -> (package, file, media type): the feedback reports' stylesheet, and the pages' own files
STATIC = {
    "feedback.css": ("grader.feedback", "templates/feedback.css", "text/css; charset=utf-8"),
    "web.css": (__package__, "static/web.css", "text/css; charset=utf-8"),
    "app.js": (__package__, "static/app.js", "text/javascript; charset=utf-8"),
}
API_PREFIXES = ("/api/", "/healthz", "/metrics", "/docs", "/redoc", "/openapi.json")


def is_page(request: Request) -> bool:
    """A request of the web pages (not the API, and not a script asking for JSON)."""
    return (not request.url.path.startswith(API_PREFIXES)
            and "application/json" not in request.headers.get("accept", ""))


def html(template: str, *, status: int = 200, headers: dict[str, str] | None = None, **context: Any) -> HTMLResponse:
    body = render(f"web/{template}", status_text=STATUS_TEXT, release=RELEASE, **context)
    return HTMLResponse(body, status_code=status, headers=SECURITY_HEADERS | (headers or {}))


def form_page(request: Request, secret: bytes, template: str, *, status: int = 200, **context: Any) -> HTMLResponse:
    """A page whose forms carry this browser's CSRF token (the browser's id cookie set if it is new)."""
    from .sessions import browser_id, csrf_binding, csrf_token, set_browser_id

    browser, new = browser_id(request)
    response = html(template, status=status, csrf=csrf_token(secret, csrf_binding(secret, request, browser)),
                    **context)
    if new:
        set_browser_id(response, request, browser)
    return response


def page(request: Request, template: str, who: Principal | None, *, status: int = 200, **context: Any) -> Response:
    """A page of the signed-in ``who`` (or of no one), its forms bound to this browser's session."""
    return form_page(request, web_secret(request), template, status=status, who=who, when=moment, **context)


def moment(value: datetime | str | None) -> dict[str, str] | None:
    """A time for ``<time datetime=…>``: app.js shows it in the viewer's zone; UTC without script."""
    if value is None:
        return None
    at = datetime.fromisoformat(value) if isinstance(value, str) else value
    return {"iso": at.isoformat(), "text": at.strftime("%Y-%m-%d %H:%M UTC")}


def redirect(url: str) -> RedirectResponse:
    """After a form: see the page at ``url`` (303, a GET)."""
    return RedirectResponse(url, status_code=303)


def error_page(request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    """An error as a page (the message is escaped like everything else)."""
    return html("error.html", status=status, headers=headers, who=None, csrf="", status_code=status, message=message)


def static_file(name: str) -> Response:
    if name not in STATIC:
        return Response("not found", status_code=404, media_type="text/plain")
    package, path, media = STATIC[name]
    data = resources.files(package).joinpath(path).read_bytes()
    return Response(data, media_type=media, headers={"Cache-Control": "public, max-age=300",
                                                             "X-Content-Type-Options": "nosniff"})
