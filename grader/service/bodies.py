"""JSON request bodies checked before FastAPI parses them: one nested more than
``grader.nesting.MAX_DEPTH`` levels is a 422 naming the limit (Python's parser would raise
RecursionError on it, and FastAPI answer an unhelpful 400). The API's routers (``grader/service/api/``)
use this route class (``APIRouter(route_class=CheckedRoute)``)."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from ..nesting import MAX_DEPTH, json_too_deep


class CheckedRoute(APIRoute):
    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def checked(request: Request) -> Response:
            if "json" in request.headers.get("content-type", "") and json_too_deep(await request.body()):
                raise RequestValidationError([{"loc": ("body",), "type": "too_deep",
                                               "msg": f"the JSON body nests arrays or objects more than {MAX_DEPTH} "
                                                      f"levels deep"}])
            return await handler(request)

        return checked
