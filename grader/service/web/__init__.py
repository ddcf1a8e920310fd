"""Web pages for students and staff, rendered on the server by the grading service.

    routes.py    the pages' routes (sign-in, student pages, staff dashboard); CSRF on every POST
    setup.py     course setup (staff): courses, assignments, roster import, handing out sign-ins
    sessions.py  signed session cookies (HttpOnly, SameSite, Secure behind TLS) and CSRF tokens
    data.py      what each page shows, read from the store; students only through the API's filter
    code.py      the lines of a student's own code a failing check points at
    pages.py     rendering with the feedback reports' Jinja2 environment; security headers; static files
    static/      app.js (live status, drag-and-drop upload, local times) and web.css; no build step

Templates are in ``grader/feedback/templates/web/``, in the one autoescaped environment of
``grader.feedback.templating``.
"""

from .pages import error_page, is_page
from .routes import WebHooks, mount_web

__all__ = ["WebHooks", "error_page", "is_page", "mount_web"]
