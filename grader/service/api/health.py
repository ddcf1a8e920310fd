"""Health and metrics, for load balancers and Prometheus."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from sqlalchemy import select

from ... import __version__
from .. import deps
from ..bodies import CheckedRoute

router = APIRouter(tags=["operations"], route_class=CheckedRoute)


@router.get("/healthz")
def healthz(request: Request) -> dict[str, Any]:
    deps.run(request, lambda s: s.execute(select(1)))
    return {"status": "ok", "mode": "embedded" if deps.settings(request).embedded else "celery", "version": __version__}


@router.get("/metrics", response_class=PlainTextResponse)
def metrics(request: Request) -> Response:
    return Response(generate_latest(request.app.state.metrics), media_type=CONTENT_TYPE_LATEST)
