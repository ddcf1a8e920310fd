"""Who a token signs in."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from ..bodies import CheckedRoute
from ..deps import Who

router = APIRouter(tags=["auth"], route_class=CheckedRoute)


@router.get("/api/me")
def me(principal: Who) -> dict[str, Any]:
    return {"kind": principal.kind, "name": principal.name}
