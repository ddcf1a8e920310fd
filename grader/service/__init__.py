"""The grading service: an HTTP API, grading workers (in-process, or Celery on many hosts) and one
SQL store shared with ``grader batch``.

    settings.py   where the data, the database and the broker are; limits; backend
    tables.py     SQLAlchemy tables (also used by grader/batch/store.py); migrations/ (Alembic)
    database.py   engines, sessions, migrations, retries
    grading.py    the one function through which the service grades a file
    jobs.py       grade one submission and commit its result exactly once
    dispatch.py   hand a submission to the graders: an in-process pool, or Celery
    tasks.py      the Celery app and task (``grader worker``)
    sweeper.py    re-enqueue submissions pending too long
    app.py        the FastAPI application; auth.py, views.py, metrics.py, exports.py beside it
    web/          the pages for students and staff (server-rendered; templates in feedback/templates/web)
    cli.py        ``grader serve`` and ``grader worker``

Only ``tables.py`` and ``database.py`` are imported outside the service (by the batch store); the
rest needs the ``service`` extra: ``pip install 'tinytorch-grader[service]'``.
"""
