"""The grading service: an HTTP API, grading workers (in-process, or Celery on many hosts) and one
SQL store shared with ``grader batch`` (its tables, migrations and engines are in ``grader/results/``).

    settings.py   where the data, the database and the broker are; limits; backend
    grading.py    the one function through which the service grades a file
    jobs.py       grade one submission and commit its result exactly once
    dispatch.py   hand a submission to the graders: an in-process pool, or Celery
    tasks.py      the Celery app and task (``grader worker``)
    sweeper.py    re-enqueue submissions pending too long
    app.py        the FastAPI application: its state, lifespan, error answers; it includes the routers
    api/          the HTTP API's routers, one per resource (courses, assignments, submissions, staff, ...)
    deps.py       what every router shares: who is asking (token or session), CSRF, the app's state
    actions.py    what API and pages both do with the app's state: uploads, regrades, live status
    web/          the pages for students and staff (server-rendered; templates in feedback/templates/web)
    lti/          the service as an LTI 1.3 tool (its router is lti/routes.py)
    auth.py, ops.py, views.py, metrics.py, exports.py, uploads.py, limits.py  beside them
    cli.py        ``grader serve`` and ``grader worker``

Nothing here is imported outside the service; it needs the ``service`` extra: ``pip install 'tinytorch-grader[service]'``.
"""
