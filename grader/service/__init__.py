"""The grading service: an HTTP API, grading workers (in-process, or Celery on many hosts) and one
SQL store shared with ``grader batch`` (its tables, migrations and engines are in ``grader/results/``).

    settings.py   where the data, the database and the broker are; limits; backend
    grading.py    the one function through which the service grades a file
    jobs.py       grade one submission and commit its result exactly once
    dispatch.py   hand a submission to the graders: an in-process pool, or Celery
    tasks.py      the Celery app and task (``grader worker``)
    sweeper.py    re-enqueue submissions pending too long
    app.py        the FastAPI application; auth.py, views.py, metrics.py, exports.py beside it
    web/          the pages for students and staff (server-rendered; templates in feedback/templates/web)
    cli.py        ``grader serve`` and ``grader worker``

Nothing here is imported outside the service; it needs the ``service`` extra: ``pip install 'tinytorch-grader[service]'``.
"""
