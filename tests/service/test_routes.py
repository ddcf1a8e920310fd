"""The service's routes, as a checked-in snapshot (routes.json): every route of ``create_app`` (the
API, the web pages, LTI) with its method, path, name, tags, status code, response class and route
class, and the OpenAPI document's operations. Moving a route between routers changes none of it;
a route added, removed or renamed on purpose is written again with
``python -m tests.service.test_routes --write`` and reviewed as a diff."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.datastructures import DefaultPlaceholder
from fastapi.routing import iter_route_contexts

from grader.service.app import create_app
from grader.service.settings import ServiceSettings

SNAPSHOT = Path(__file__).with_name("routes.json")


def _class_name(value: Any) -> str:
    if isinstance(value, DefaultPlaceholder):
        value = value.value
    return f"{value.__module__}.{value.__qualname__}"


def routes(app: FastAPI) -> list[dict[str, Any]]:
    """Every route the app answers, in the order it tries them (included routers flattened)."""
    found = []
    for context in iter_route_contexts(app.routes):
        route = context.original_route
        entry: dict[str, Any] = {"methods": sorted(context.methods or ()), "path": context.path,
                                 "name": context.name, "route_class": type(route).__name__}
        if hasattr(context, "status_code"):  # an API route (FastAPI's own /docs and /openapi.json are not)
            entry |= {"tags": [str(t) for t in context.tags], "status_code": context.status_code,
                      "response_class": _class_name(context.response_class),
                      "include_in_schema": context.include_in_schema, "operation_id": context.operation_id}
        found.append(entry)
    return found


def operations(app: FastAPI) -> dict[str, dict[str, Any]]:
    """The OpenAPI document's operations (what ``/docs`` lists), without their prose."""
    document = app.openapi()
    found: dict[str, dict[str, Any]] = {}
    for path, methods in sorted(document["paths"].items()):
        for method, op in sorted(methods.items()):
            body = op.get("requestBody", {}).get("content", {})
            found[f"{method.upper()} {path}"] = {
                "operationId": op["operationId"], "tags": op.get("tags", []),
                "parameters": [f"{p['in']}:{p['name']}{'' if p.get('required') else '?'}" for p in op.get("parameters", [])],
                "body": {media: spec.get("schema", {}).get("$ref", spec.get("schema", {}).get("type", ""))
                         for media, spec in sorted(body.items())},
                "responses": sorted(op.get("responses", {}))}
    return found


def current(tmp: Path) -> dict[str, Any]:
    app = create_app(ServiceSettings(data_dir=tmp / "data"))  # routes only: the app is not started
    return {"routes": routes(app), "openapi": operations(app)}


def _segments(path: str) -> list[str | None]:
    return [None if re.fullmatch(r"\{[^}]+\}", part) else part for part in path.strip("/").split("/")]


def overlapping(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether one URL could match both routes (so that which comes first decides)."""
    if not set(a["methods"]) & set(b["methods"]):
        return False
    sa, sb = _segments(a["path"]), _segments(b["path"])
    return len(sa) == len(sb) and all(x is None or y is None or x == y for x, y in zip(sa, sb, strict=True))


def _key(route: dict[str, Any]) -> str:
    return f"{','.join(route['methods'])} {route['path']} {route['name']}"


def test_the_routes_are_the_snapshots(tmp_path: Path) -> None:
    want, got = json.loads(SNAPSHOT.read_text(encoding="utf-8")), current(tmp_path)
    assert sorted(got["routes"], key=_key) == sorted(want["routes"], key=_key)
    assert set(got["openapi"]) == set(want["openapi"])  # the same OpenAPI paths and methods
    assert got["openapi"] == want["openapi"]


def test_routes_one_url_could_reach_keep_their_order(tmp_path: Path) -> None:
    """Routes are tried in order: of two that one URL can match, the first one answers it."""
    want = json.loads(SNAPSHOT.read_text(encoding="utf-8"))["routes"]
    place = {_key(r): i for i, r in enumerate(current(tmp_path)["routes"])}
    pairs = [(_key(a), _key(b)) for i, a in enumerate(want) for b in want[i + 1:] if overlapping(a, b)]
    assert [(a, b) for a, b in pairs if place[a] > place[b]] == []


def test_overlapping_routes_are_told_apart() -> None:
    def route(method: str, path: str) -> dict[str, Any]:
        return {"methods": [method], "path": path}

    assert overlapping(route("GET", "/staff/s/{id}"), route("GET", "/staff/{page}/new"))
    assert overlapping(route("GET", "/s/{id}"), route("GET", "/s/new"))
    assert not overlapping(route("GET", "/s/{id}"), route("POST", "/s/new"))
    assert not overlapping(route("GET", "/staff/s/{id}"), route("GET", "/staff/courses/{course}"))
    assert not overlapping(route("GET", "/s/{id}"), route("GET", "/s/{id}/events"))


def test_the_snapshot_knows_every_kind_of_route() -> None:
    """The snapshot covers the API, the web pages and LTI (a snapshot of a part would pass too)."""
    paths = {r["path"] for r in json.loads(SNAPSHOT.read_text(encoding="utf-8"))["routes"]}
    assert {"/api/courses", "/signin", "/staff/courses", "/lti/launch", "/healthz", "/docs"} <= paths


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python -m tests.service.test_routes --write   (writes tests/service/routes.json)")
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        found = current(Path(folder))
    # one route, one operation a line: a change reads as a one-line diff
    lines = ["{", ' "routes": [', ",\n".join(f"  {json.dumps(r)}" for r in found["routes"]), " ],", ' "openapi": {',
             ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in found["openapi"].items()), " }", "}"]
    SNAPSHOT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}")
