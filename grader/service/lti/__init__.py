"""The service as an LTI 1.3 tool: launches from an LMS, Assignment and Grade Services passback and
Names and Role Provisioning roster imports. ``routes.router`` is mounted on the app; its tables
are ``grader/results/lti_tables.py`` (importable with SQLAlchemy alone, like ``grader.results.tables``)."""
