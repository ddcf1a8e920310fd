"""A service assignment names its course module: the only installed one by default; with two
installed (modules 11 and 12, and the toy ``relu`` unit), a missing or unknown module is a 422 that lists
them, never a 500."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from .conftest import bearer


def _create(client: TestClient, token: str, slug: str, **body: object) -> tuple[int, dict[str, object]]:
    staff = bearer(token)
    client.post("/api/courses", json={"slug": "cs249", "title": "ML systems"}, headers=staff)
    r = client.post("/api/courses/cs249/assignments", json={"slug": slug, **body}, headers=staff)
    return r.status_code, r.json()


@pytest.mark.usefixtures("no_standing_module")
def test_an_assignment_names_its_module(toy_site: Path, embedded: tuple[TestClient, str]) -> None:
    client, token = embedded
    status, missing = _create(client, token, "a1")
    assert status == 422 and "several course modules are installed (attention (12), embeddings (11), relu)" in str(missing)
    status, unknown = _create(client, token, "a2", module="transformers")
    assert status == 422 and "no course module 'transformers' is installed (installed: attention (12), embeddings (11), " \
        "relu)" in str(unknown)
    status, toy = _create(client, token, "a3", module="relu")
    assert status == 201, toy
    status, eleven = _create(client, token, "a4", module="11")
    assert status == 201, eleven
    r = client.get("/api/courses/cs249/assignments/a4", headers=bearer(token))
    assert "tinytorch-11-embeddings" in r.text
    status, twelve = _create(client, token, "a5", module="attention")
    assert status == 201, twelve
    r = client.get("/api/courses/cs249/assignments/a5", headers=bearer(token))
    assert "tinytorch-12-attention" in r.text
