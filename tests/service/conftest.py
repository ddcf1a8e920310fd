"""Fixtures of the service tests: an embedded app on SQLite with a course, an assignment, a roster
and credentials; helpers to upload and wait. Real grading (local backend) unless a test fakes it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the service extra is not installed: pip install '.[service]'")

from fastapi.testclient import TestClient  # noqa: E402

from grader.service.app import create_app  # noqa: E402
from grader.service.settings import Settings  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SUBMISSIONS = ROOT / "submissions"
ROSTER = "student_id,name,email\nalice,Alice Liddell,alice@example.edu\nbob,Bob Stone,bob@example.edu\n"


@dataclass
class Course:
    client: TestClient
    staff: dict[str, str]
    students: dict[str, dict[str, str]]  # student id -> auth header
    base: str  # /api/courses/<course>/assignments/<assignment>

    def upload(self, who: str, path: Path, *, name: str | None = None, content: bytes | None = None,
               headers: dict[str, str] | None = None) -> Any:
        data = content if content is not None else path.read_bytes()
        return self.client.post(f"{self.base}/submissions", headers=headers or self.students[who],
                                files={"file": (name or path.name, data, "application/octet-stream")})

    def wait(self, submission_id: str, who: str, timeout: float = 60) -> dict[str, Any]:
        r = self.client.get(f"/api/submissions/{submission_id}", params={"wait": timeout},
                            headers=self.students.get(who, self.staff))
        assert r.status_code == 200, r.text
        view: dict[str, Any] = r.json()
        assert view["final"], f"not graded within {timeout} s: {view}"
        return view

    def result(self, submission_id: str, who: str) -> Any:
        return self.client.get(f"/api/submissions/{submission_id}/result", headers=self.students.get(who, self.staff))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def make_course(client: TestClient, staff_token: str, *, policy: dict[str, Any] | None = None,
                rate_limit: dict[str, int] | None = None, **assignment: Any) -> Course:
    staff = bearer(staff_token)
    r = client.post("/api/courses", json={"slug": "cs249", "title": "ML systems"}, headers=staff)
    assert r.status_code == 201, r.text
    body = {"slug": "m11", **assignment}
    if policy is not None:
        body["policy"] = policy
    if rate_limit is not None:
        body["rate_limit"] = rate_limit
    r = client.post("/api/courses/cs249/assignments", json=body, headers=staff)
    assert r.status_code == 201, r.text
    r = client.post("/api/courses/cs249/roster", files={"roster": ("roster.csv", ROSTER.encode(), "text/csv")},
                    headers=staff)
    assert r.status_code == 200, r.text
    students = {c["student_id"]: bearer(c["token"]) for c in r.json()["credentials"]}
    return Course(client, staff, students, "/api/courses/cs249/assignments/m11")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", workers=2, official=True, hostname="embedded@test")


@pytest.fixture
def embedded(settings: Settings) -> Iterator[tuple[TestClient, str]]:
    """A started embedded service and its first staff token (as printed on first start)."""
    printed: list[str] = []
    with TestClient(create_app(settings, announce=printed.append)) as client:
        assert len(printed) == 1 and "Bearer staff_" in printed[0]
        yield client, printed[0].rsplit(" ", 1)[1]


@pytest.fixture
def course(embedded: tuple[TestClient, str]) -> Course:
    client, token = embedded
    return make_course(client, token)
