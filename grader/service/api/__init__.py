"""The HTTP API's routes (OpenAPI at ``/docs``), one ``APIRouter`` per resource. Routes only
translate HTTP to ``ops``, ``views`` and ``actions``; what they share (who is asking, the app's
state) comes from ``deps``.

    health.py       GET /healthz, GET /metrics
    sessions.py     GET /api/me; signing out everywhere (staff: their own browsers, or a student's)
    courses.py      courses, and a course's roster and students
    assignments.py  a course's assignments
    submissions.py  uploads, their status (long poll, events) and results
    staff.py        regrades, overrides and the audit log
    exports.py      gradebooks in every export format, and check statistics

``ROUTERS`` is the order ``app.create_app`` includes them in.
"""

from __future__ import annotations

from . import assignments, courses, exports, health, sessions, staff, submissions

ROUTERS = (health.router, sessions.router, courses.router, assignments.router, submissions.router, staff.router,
           exports.router)

__all__ = ["ROUTERS"]
