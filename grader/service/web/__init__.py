"""Web pages for students and staff, rendered on the server by the grading service.

    routes.py    ``mount_web``: the pages' routers on the app, and signed-out browsers sent to sign in
    signin.py    signing in and out (one browser, or every browser of a staff member); static files
    student.py   a student's pages: their assignments, uploads, feedback, live status, comparisons
    staff.py     the staff pages: the dashboard, a submission, regrades, overrides, exports
    setup.py     course setup (staff): courses, assignments, roster import, handing out sign-ins
    sessions.py  signed session cookies (HttpOnly, SameSite, Secure behind TLS) and CSRF tokens
    data.py      what each page shows, read from the store; students only through the API's filter
    code.py      the lines of a student's own code a failing check points at
    pages.py     rendering with the feedback reports' Jinja2 environment; security headers; static files
    static/      app.js (live status, drag-and-drop upload, local times) and web.css; no build step

Who is signed in and the CSRF check come from ``grader.service.deps``, as for the API. Every POST
checks its CSRF token first. Templates are in ``grader/feedback/templates/web/``, in the one
autoescaped environment of ``grader.feedback.templating``.
"""
