"""``/metrics`` in the Prometheus text format, read from the store at each scrape, so that every
API replica reports the same numbers whichever host graded what."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from ..results.database import Database
from ..results.tables import Grading, Submission, Worker, utcnow

BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 300.0)
WORKER_SEEN_S = 60.0


class StoreCollector(Collector):
    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[Metric]:
        yield from self.db.run(_metrics, attempts=2)


def _metrics(session: Session) -> list[Metric]:
    by_status = dict(session.execute(select(Submission.status, func.count()).group_by(Submission.status)).all())
    queue = GaugeMetricFamily("grader_queue_depth", "Submissions waiting for a worker, or being graded", labels=["state"])
    for state in ("queued", "grading"):
        queue.add_metric([state], float(by_status.get(state, 0)))
    seen = session.scalar(select(func.count()).select_from(Worker)
                          .where(Worker.last_seen >= utcnow() - timedelta(seconds=WORKER_SEEN_S))) or 0
    workers = GaugeMetricFamily("grader_workers_seen", f"Grading workers with a heartbeat in the last {WORKER_SEEN_S:g} s",
                                value=float(seen))
    graded = CounterMetricFamily("grader_worker_gradings", "Gradings stored by each worker since it first beat",
                                 labels=["worker", "backend"])
    for hostname, backend, count in session.execute(select(Worker.hostname, Worker.backend, Worker.graded)).all():
        graded.add_metric([hostname, backend], float(count))
    submissions = CounterMetricFamily("grader_submissions", "Submissions accepted",
                                      value=float(sum(by_status.values())))
    results = CounterMetricFamily("grader_gradings", "Gradings stored, by status", labels=["status"])
    for status, count in session.execute(select(Grading.status, func.count()).group_by(Grading.status)).all():
        results.add_metric([status], float(count))
    return [queue, workers, graded, submissions, results, _latency(session)]


def _latency(session: Session) -> HistogramMetricFamily:
    counts = [func.sum(case((Grading.latency_s <= b, 1), else_=0)) for b in BUCKETS]
    row = session.execute(select(func.count(), func.coalesce(func.sum(Grading.latency_s), 0.0), *counts)).one()
    total, latency_sum, *cumulative = row
    buckets = [(f"{b:g}", float(c or 0)) for b, c in zip(BUCKETS, cumulative, strict=True)]
    return HistogramMetricFamily("grader_grading_latency_seconds",
                                 "From upload (or regrade request) to the stored result",
                                 buckets=[*buckets, ("+Inf", float(total))], sum_value=float(latency_sum))


def registry(db: Database) -> CollectorRegistry:
    reg = CollectorRegistry(auto_describe=False)
    reg.register(StoreCollector(db))
    return reg
