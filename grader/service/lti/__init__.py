"""The service as an LTI 1.3 tool: launches from an LMS, Assignment and Grade Services passback and
Names and Role Provisioning roster imports. ``routes.router`` is mounted on the app; ``models``
holds its tables (importable with SQLAlchemy alone, like ``grader.service.tables``)."""
