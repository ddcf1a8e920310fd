"""The Celery side of the scaled-out mode: the app, the grading task, and ``grader worker``.

Reliability comes from Celery's own settings, not from code here: a job is acknowledged only after
``run_job`` returned, that is after its result was committed (``acks_late``); a job whose worker
died is given back to the queue (``reject_on_worker_lost``; and Redis redelivers what a killed
worker had taken after ``visibility_timeout``); a job that met a database outage is retried with
backoff (at most 10 s apart). A worker killed outright is noticed sooner, by its heartbeat: the
API's sweeper (grader.service.sweeper) hands its gradings over again. Jobs travel as JSON, never pickle.
"""

from __future__ import annotations

import logging
import re
from functools import partial
from typing import Any

from celery import Celery
from celery.app.amqp import AMQP
from celery.signals import worker_process_init, worker_shutdown, worker_shutting_down
from kombu.connection import Connection

from ..results.database import Database, StoreUnavailable
from .jobs import Heartbeat, Slots, requeue_grading_of, run_job
from .notify import ENDED, STARTED, announce
from .settings import ServiceSettings

TASK_NAME = "grader.grade"  # the Celery task name the API enqueues and workers serve
log = logging.getLogger("grader.service")
QUEUE = "grader"
SUBMISSION_ID = re.compile(r"^[0-9a-f]{32}$")


RECONNECT_MAX_S = 5.0  # a lost broker is tried again at least this often (kombu's default: 30 s)


class PromptConnection(Connection):
    """A broker connection that, lost, is tried again every 1, 2 ... 5 s, never 30 s apart: after a
    long outage a worker is back within seconds of its broker (Celery's consumer asks kombu's
    defaults, whose pauses grow to 30 s)."""

    def ensure_connection(self, errback: Any = None, max_retries: int | None = None, interval_start: float = 1,
                          interval_step: float = 1, interval_max: float = RECONNECT_MAX_S, **kwargs: Any) -> Any:
        return super().ensure_connection(errback, max_retries, interval_start, interval_step,  # type: ignore[no-untyped-call]
                                         min(interval_max, RECONNECT_MAX_S), **kwargs)


class _AMQP(AMQP):  # type: ignore[misc]
    Connection = PromptConnection


def make_celery(settings: ServiceSettings) -> Celery:
    app = Celery("grader", broker=settings.broker, set_as_current=False, amqp=_AMQP)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json", accept_content=["json"], result_serializer="json",
        task_ignore_result=True,
        task_default_queue=QUEUE,
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a worker waits for its broker for as long as it takes
        broker_connection_timeout=3,
        broker_transport_options={"visibility_timeout": settings.visibility_timeout_s, "socket_connect_timeout": 3,
                                  "socket_timeout": 10},
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_hijack_root_logger=False,
        enable_utc=True,
    )
    return app


class _State:
    db: Database | None = None
    settings: ServiceSettings | None = None
    slots: Slots | None = None


def register_task(app: Celery) -> Any:
    @app.task(  # type: ignore[untyped-decorator]
        name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, autoretry_for=(StoreUnavailable,),
              retry_backoff=1, retry_backoff_max=10, retry_jitter=True, max_retries=60)
    def grade(submission_id: str, generation: int) -> str:
        if not (isinstance(submission_id, str) and SUBMISSION_ID.match(submission_id)
                and isinstance(generation, int) and generation >= 1):
            log.error("refused a malformed job: %r %r", submission_id, generation)
            return "malformed"
        db, s = _State.db, _State.settings
        assert db is not None and s is not None, "the task runs only in 'grader worker'"
        stored: list[dict[str, Any]] = []  # the final status view, told with the announcement
        outcome = run_job(db, submission_id, generation, worker=s.hostname, backend=s.backend, official=s.official,
                          slots=_State.slots, on_started=partial(announce, s.broker, change=STARTED),  # the API's live statuses
                          on_stored=stored.append)
        announce(s.broker, submission_id, ENDED, stored[0] if stored else None)
        return outcome

    return grade


class QuietRetries(logging.Filter):
    """Celery's consumer logs "Cannot connect to <broker> ... Trying again in N seconds" on every try
    while its broker does not answer. The first is said once, plainly; the next ones are dropped
    until a connection is made ("Connected to"), so the next outage is said once again."""

    def __init__(self) -> None:
        super().__init__()
        self.said = False

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.endswith(".connection") and str(record.msg).startswith("Connected to"):
            self.said = False
            return True
        if "Cannot connect to" not in str(record.msg):
            return True
        if self.said:
            return False
        self.said = True
        uri, reason = (record.args[:2] if isinstance(record.args, tuple) and len(record.args) >= 2
                       else ("the broker", ""))
        record.msg = ("the broker %s does not answer (%s); this worker keeps trying, quietly, and takes jobs as "
                      "soon as it answers: start it, or fix --broker")
        record.args = (uri, str(reason).rstrip("."))
        return True

    def install(self) -> QuietRetries:
        for name in ("celery.worker.consumer.consumer", "celery.worker.consumer.connection"):
            logging.getLogger(name).addFilter(self)
        return self


def run_worker(settings: ServiceSettings, pool: str = "threads") -> int:
    """``grader worker``: migrate if needed, then consume jobs until SIGTERM (warm shutdown: the
    gradings in progress finish and are acknowledged first; the job held waiting goes back to the
    queue) or SIGINT. In the threads pool (the default), Celery runs one thread more than
    ``settings.workers``: the job it holds is claimed and waits for a sandbox slot (``Slots``), so
    that no grading waits for the last one's bookkeeping. Prefork and solo run as many as told."""
    db = Database(settings.database_url)
    db.migrate()
    slots = Slots(settings.workers) if pool == "threads" else None  # a semaphore is not shared by processes
    _State.db, _State.settings, _State.slots = db, settings, slots
    app = make_celery(settings)
    register_task(app)
    QuietRetries().install()
    left = db.run(lambda s: requeue_grading_of(s, settings.hostname))
    if left:
        log.warning("%d grading(s) of a previous run of %s were left unfinished: graded again", left, settings.hostname)
    heartbeat = Heartbeat(db, settings.hostname, settings.backend, settings.heartbeat_s).start()
    worker_process_init.connect(lambda **_: db.engine.dispose(close=False), weak=False)  # prefork children
    if slots is not None:
        worker_shutting_down.connect(lambda **_: slots.close(), weak=False)
    worker_shutdown.connect(lambda **_: _shutdown(heartbeat), weak=False)
    threads = settings.workers + (slots is not None)
    app.worker_main(["worker", f"--pool={pool}", f"--concurrency={threads}", f"--hostname={settings.hostname}",
                     f"--queues={QUEUE}", "--loglevel=INFO", "--without-gossip", "--without-mingle"])
    return 0


def _shutdown(heartbeat: Heartbeat) -> None:
    from .grading import close_graders

    heartbeat.stop()
    close_graders()
