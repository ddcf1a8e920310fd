"""The LTI 1.3 tool against a third-party platform implementation (lti1p3platform, served on
127.0.0.1 by tests/service/lti_platform.py): launches, rejections, score passback and retries."""

from __future__ import annotations

import ipaddress
import re
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlparse

import httpx2
import jwt
import pytest
from fastapi.testclient import TestClient

from grader.results.tables import Assignment, Grading, Submission, utcnow
from grader.service import ops
from grader.service.app import create_app
from grader.service.lti.ags import Tokens, deliver_due
from grader.service.lti.launch import JWKS_REFETCH_COOLDOWN_S
from grader.service.lti.routes import app_config, tokens
from grader.service.settings import ServiceSettings
from tests.service.conftest import browser
from tests.service.lti_platform import CLIENT_ID, LMS, Served, lti_toml, rsa_pem


def _world(tmp_path: Path, registered: bool = True, allow: tuple[str, ...] = ("127.0.0.1/32",),
           assignment: tuple[str, str, str] = ("m11", "embeddings", "Embeddings"),
           ) -> Iterator[tuple[TestClient, Served, dict[str, str]]]:
    lms = LMS()
    served = Served(lms)
    (tmp_path / "lti.toml").write_text(lti_toml(lms, "https://testserver", 0.01, registered, allow))
    tokens_seen: list[str] = []
    app = create_app(ServiceSettings(data_dir=tmp_path, sweep_interval_s=3600), announce=tokens_seen.append)
    with browser(app, base_url="https://testserver") as client:
        staff = {"Authorization": "Bearer " + tokens_seen[0].rsplit(" ", 1)[1]}
        lms.tool_jwks = lambda: client.get("/lti/jwks").json()
        assert client.post("/api/courses", json={"slug": "cs249", "title": "ML Systems"}, headers=staff).status_code == 201
        slug, module, title = assignment
        r = client.post("/api/courses/cs249/assignments", headers=staff,
                        json={"slug": slug, "module": module, "title": title, "policy": {"total": "visible"}})
        assert r.status_code == 201, r.text
        link = client.get(f"/lti/courses/cs249/assignments/{slug}/link", headers=staff).json()["value"]
        lms.custom = {"grader_link": link}
        if registered:
            staff_opens_the_link(client, served, staff, slug)
        yield client, served, staff
    served.stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[TestClient, Served, dict[str, str]]]:
    yield from _world(tmp_path)


@pytest.fixture
def unregistered(tmp_path: Path) -> Iterator[tuple[TestClient, Served, dict[str, str]]]:
    """The tool with no platform in lti.toml: one comes by dynamic registration."""
    yield from _world(tmp_path, registered=False)


def login(client: TestClient, served: Served, **extra: str) -> tuple[dict[str, Any], str]:
    """OIDC login at the tool, then the platform's authorization answer: (launch data, state)."""
    r = client.get("/lti/login", params={"iss": served.lms.url, "login_hint": "u1", "client_id": CLIENT_ID,
                                         "target_link_uri": "https://testserver/lti/launch"}, follow_redirects=False)
    assert r.status_code == 302, r.text
    target = r.headers["location"]
    assert target.startswith(served.lms.url + "/auth?")
    q = parse_qs(urlparse(target).query)
    assert q["redirect_uri"] == ["https://testserver/lti/launch"] and q["response_mode"] == ["form_post"]
    data = httpx2.get(target + "".join(f"&{k}={v}" for k, v in extra.items())).json()
    return data, q["state"][0]


def launch(client: TestClient, served: Served, **extra: str) -> Any:
    data, _state = login(client, served, **extra)
    return client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]},
                       follow_redirects=False)


INSTRUCTOR = "http://purl.imsglobal.org/vocab/lis/v2/membership%23Instructor"


def test_a_good_launch_signs_the_learner_in_as_a_student_of_the_course(world: Any) -> None:
    client, served, staff = world
    r = launch(client, served, lineitem="item-a")
    assert (r.status_code, r.headers["location"]) == (303, "/c/cs249/m11"), r.text
    page = client.get("/c/cs249/m11")
    assert page.status_code == 200 and "alice@example.edu" in page.text and "Sign in" not in page.text
    students = client.get("/api/courses/cs249/students", headers=staff).json()
    assert [s["student_id"] for s in students] == ["alice@example.edu"]


def test_tabs_launching_at_once_all_land_signed_in_as_one_student(world: Any) -> None:
    """A double click, or the assignment opened in several tabs: each login keeps its own state
    cookie, and the first launches, run at once, make one student."""
    client, served, staff = world
    logins = [login(client, served)[0] for _ in range(4)]  # one browser: its cookie jar holds all four
    barrier, answers = threading.Barrier(len(logins)), []

    def tab(data: dict[str, Any]) -> None:
        with browser(client.app, base_url="https://testserver", cookies=client.cookies) as other:
            barrier.wait()
            r = other.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]},
                           follow_redirects=False)
            answers.append((r.status_code, r.headers.get("location")))

    tabs = [threading.Thread(target=tab, args=(data,)) for data in logins]
    for t in tabs:
        t.start()
    for t in tabs:
        t.join()
    assert answers == [(303, "/c/cs249/m11")] * len(logins)
    students = client.get("/api/courses/cs249/students", headers=staff).json()
    assert [s["student_id"] for s in students] == ["alice@example.edu"]


def staff_opens_the_link(client: TestClient, served: Served, staff: dict[str, str], assignment: str = "m11") -> None:
    """The LMS course's first launch, by an instructor who signs in with a staff token: only course
    staff link a new LMS course to the grader course its link names."""
    r = launch(client, served, role=INSTRUCTOR, sub="t0")
    assert r.status_code == 303 and r.headers["location"].startswith("/signin?"), r.text
    next_url = unquote(r.headers["location"].split("next=", 1)[1])
    staff_sign_in(client, staff["Authorization"].split()[1], next_url)
    linked = confirm_staff_link(client, next_url)
    assert (linked.status_code, linked.headers["location"]) == (303, f"/staff/c/cs249/{assignment}"), linked.text
    client.cookies.clear()


def confirm_staff_link(client: TestClient, link_url: str) -> Any:
    """The staff member, signed in, confirms on /lti/staff-link that the LMS account is theirs."""
    page = client.get(link_url, follow_redirects=False)
    assert page.status_code == 200 and "Link my LMS account" in page.text, page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    then = re.search(r'name="then" value="([^"]+)"', page.text)
    assert csrf and then, page.text
    return client.post("/lti/staff-link", data={"csrf": csrf.group(1), "then": unescape(then.group(1))},
                       follow_redirects=False)


def staff_sign_in(client: TestClient, token: str, next_url: str) -> Any:
    form = client.get("/signin", params={"next": next_url})
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf, form.text
    return client.post("/signin", data={"token": token, "csrf": csrf.group(1), "next": next_url},
                       follow_redirects=False)


def test_an_instructor_becomes_staff_only_after_signing_in_once_with_a_staff_token(world: Any) -> None:
    client, served, staff = world
    r = launch(client, served, role=INSTRUCTOR, sub="t1")
    assert r.status_code == 303 and r.headers["location"].startswith("/signin?next=%2Flti%2Fstaff-link"), r.headers
    assert client.get("/staff/c/cs249/m11", follow_redirects=False).status_code == 303  # no staff session yet
    assert client.get("/api/courses/cs249/students", headers=staff).json() == []  # and no student either
    next_url = unquote(r.headers["location"].split("next=", 1)[1])
    signed = staff_sign_in(client, staff["Authorization"].split()[1], next_url)
    assert signed.headers["location"] == next_url
    linked = confirm_staff_link(client, next_url)
    assert (linked.status_code, linked.headers["location"]) == (303, "/staff/c/cs249/m11")
    client.cookies.clear()  # a new browser: the next launch signs the instructor in directly
    again = launch(client, served, role=INSTRUCTOR, sub="t1")
    assert (again.status_code, again.headers["location"]) == (303, "/staff/c/cs249/m11")
    assert client.get("/staff/c/cs249/m11").status_code == 200
    client.cookies.clear()
    other = launch(client, served, role=INSTRUCTOR, sub="t2")  # another instructor: not linked
    assert other.headers["location"].startswith("/signin")


@pytest.mark.parametrize("custom, reason", [
    ({"grader_link": "cs249/m11.0123456789abcdef0123456789abcdef"}, "not one this grader issued"),
    ({"course": "cs249", "assignment": "m11"}, "not linked to a grader course yet"),
    ({}, "not linked to a grader course yet"),
])
def test_a_link_the_grader_did_not_sign_cannot_attach_an_lms_course(world: Any, custom: dict[str, str],
                                                                     reason: str) -> None:
    client, served, staff = world
    served.lms.custom = custom
    r = launch(client, served, context="ctx-new", role=INSTRUCTOR, sub="t0")  # staff, in a course not linked yet
    assert r.status_code == 400 and reason in unescape(r.text), r.text
    assert client.get("/api/courses/cs249/students", headers=staff).json() == []


def test_one_lms_course_grades_into_one_grader_course(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served).status_code == 303
    assert client.post("/api/courses", json={"slug": "other", "title": "Other"}, headers=staff).status_code == 201
    assert client.post("/api/courses/other/assignments", headers=staff, json={"slug": "m11", "module": "embeddings"}
                       ).status_code == 201
    served.lms.custom = {"grader_link": client.get("/lti/courses/other/assignments/m11/link", headers=staff
                                                   ).json()["value"]}
    r = launch(client, served, link="link-2")
    assert r.status_code == 400 and "linked to grader course 'cs249'" in unescape(r.text), r.text


def claims_of(token: str) -> dict[str, Any]:
    return jwt.decode(token, options={"verify_signature": False})


@pytest.mark.parametrize("change, reason", [
    ({"aud": "someone-else"}, "not for this tool"),
    ({"https://purl.imsglobal.org/spec/lti/claim/deployment_id": "unknown-deployment"}, "deployment id"),
    ({"exp": int(time.time()) - 300, "iat": int(time.time()) - 900}, "expired"),
    ({"nonce": "not-the-login-nonce"}, "nonce"),
])
def test_a_tampered_token_signed_by_the_platform_is_still_rejected(world: Any, change: dict[str, Any],
                                                                   reason: str) -> None:
    client, served, staff = world
    data, _ = login(client, served)
    token = served.sign(claims_of(data["id_token"]) | change)
    r = client.post("/lti/launch", data={"id_token": token, "state": data["state"]})
    assert r.status_code == 400 and reason in unescape(r.text), r.text
    assert any(reason in e["detail"] for e in client.get("/lti/events", headers=staff).json())


def test_forged_signature_wrong_issuer_and_expired_library_token_are_rejected(world: Any) -> None:
    client, served, _ = world
    data, _ = login(client, served)
    forged = served.sign(claims_of(data["id_token"]), key=rsa_pem()[0])
    r = client.post("/lti/launch", data={"id_token": forged, "state": data["state"]})
    assert r.status_code == 400 and "signature" in unescape(r.text)
    data, _ = login(client, served)
    r = client.post("/lti/launch", data={"id_token": served.sign(claims_of(data["id_token"]) | {"iss": "https://evil"}),
                                         "state": data["state"]})
    assert r.status_code == 400 and "issuer" in unescape(r.text)
    r = launch(client, served, expired="1")  # the platform library's own expiry setting
    assert r.status_code == 400 and "expired" in unescape(r.text)


def test_a_replayed_launch_is_rejected(world: Any) -> None:
    client, served, _ = world
    data, _ = login(client, served)
    assert client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]},
                       follow_redirects=False).status_code == 303
    client.cookies.set("grader_lti_state_" + data["state"], data["state"])  # the same browser posts the same launch again
    again = client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]})
    assert again.status_code == 400 and ("already used" in unescape(again.text) or "used before" in unescape(again.text))
    _fresh, state2 = login(client, served)  # a fresh login, but the old token: its nonce is refused
    r = client.post("/lti/launch", data={"id_token": data["id_token"], "state": state2})
    assert r.status_code == 400 and "nonce" in unescape(r.text)


def grade(client: TestClient, score: float, sub_id: str | None = None) -> str:
    """A grading result for alice's submission, as the grading workers commit it."""
    db = client.app.state.db  # type: ignore[attr-defined]

    def work(s: Any) -> str:
        from sqlalchemy import select

        from grader.results.tables import Student
        student = s.scalar(select(Student))
        a = s.scalar(select(Assignment))
        nonlocal sub_id
        now = utcnow()
        if sub_id is None:
            sub_id = uuid.uuid4().hex
            s.add(Submission(id=sub_id, assignment_id=a.id, student_pk=student.id, sha256=sub_id * 2, file_name="e.ipynb",
                             content=b"{}", status="graded", generation=1, created_at=now, submitted_at=now,
                             requested_at=now))
            generation = 1
        else:
            sub = s.get(Submission, sub_id)
            sub.generation += 1
            generation = sub.generation
        s.flush()
        s.add(Grading(submission_id=sub_id, generation=generation, status="graded", score=score, max_score=100.0,
                      rubric_hash="x", requested_at=now, finished_at=now, latency_s=0.1))
        return sub_id

    return str(db.run(work))


def deliver(client: TestClient) -> int:
    app = client.app
    return deliver_due(app.state.db, app_config(app), tokens(app))  # type: ignore[arg-type,attr-defined]


def test_score_passback_posts_the_score_media_type_and_fields(world: Any) -> None:
    client, served, _ = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 87.5)
    assert deliver(client) == 1
    [score] = served.lms.scores
    assert score["lineitem"] == "item-a" and score["userId"] == "lms-user-1"
    assert (score["scoreGiven"], score["scoreMaximum"]) == (87.5, 100.0)
    assert (score["activityProgress"], score["gradingProgress"]) == ("Completed", "FullyGraded")
    assert "." in score["timestamp"] and score["timestamp"].endswith("+00:00")
    assert served.lms.refused == []
    grade(client, 90.0)  # another submission: the token is reused from the cache
    assert deliver(client) == 1 and served.lms.token_requests == 1


def test_a_launch_without_line_item_creates_one(world: Any) -> None:
    client, served, _ = world
    assert launch(client, served).status_code == 303
    grade(client, 50.0)
    assert deliver(client) == 1
    [(item_id, item)] = served.lms.lineitems.items()
    assert item["scoreMaximum"] == 100.0 and item["label"] == "Embeddings"
    assert served.lms.scores[0]["lineitem"] == item_id


def test_passback_failure_is_visible_retried_and_delivered_once_the_platform_is_back(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 70.0)
    served.lms.down = True
    assert deliver(client) == 0
    time.sleep(0.05)
    assert deliver(client) == 0
    [failed] = client.get("/lti/passbacks", params={"state": "failed"}, headers=staff).json()
    assert failed["attempts"] == 2 and "503" in failed["last_error"]
    served.lms.down = False
    r = client.post("/lti/passbacks/retry", headers=staff)
    assert r.json() == {"delivered": 1}
    assert [s["scoreGiven"] for s in served.lms.scores] == [70.0]
    assert client.get("/lti/passbacks", params={"state": "failed"}, headers=staff).json() == []
    assert deliver(client) == 0  # nothing sent twice


def test_a_regrade_sends_the_new_score_with_a_later_timestamp(world: Any) -> None:
    client, served, _ = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    sub = grade(client, 60.0)
    assert deliver(client) == 1
    grade(client, 95.0, sub_id=sub)
    assert deliver(client) == 1
    first, second = served.lms.scores
    assert (first["scoreGiven"], second["scoreGiven"]) == (60.0, 95.0)
    assert second["timestamp"] > first["timestamp"]


def test_the_tool_publishes_its_keys_and_rotation_keeps_the_previous_one(world: Any) -> None:
    client, served, staff = world
    before = {k["kid"] for k in client.get("/lti/jwks").json()["keys"]}
    new = client.post("/lti/keys/rotate", headers=staff).json()["kid"]
    after = {k["kid"] for k in client.get("/lti/jwks").json()["keys"]}
    assert after == before | {new}
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 80.0)
    assert deliver(client) == 1  # the platform verified an assertion signed with the new key


def test_names_and_roles_import_the_roster(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served).status_code == 303
    served.lms.members = [
        {"user_id": "u2", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], "name": "Bob",
         "email": "bob@example.edu", "status": "Active"},
        {"user_id": "t9", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor"], "name": "Ta"},
        {"user_id": "u3", "roles": ["http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"], "status": "Inactive"},
    ]
    r = client.post("/api/courses/cs249/roster/sync".replace("/api", "/lti"), headers=staff)
    assert r.json() == {"students": 1, "instructors": 1, "inactive": 1, "conflicts": 0}, r.text
    ids = [s["student_id"] for s in client.get("/api/courses/cs249/students", headers=staff).json()]
    assert ids == ["alice@example.edu", "bob@example.edu"]


def test_only_the_latest_submissions_effective_score_is_sent_overrides_included(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    old = grade(client, 40.0)
    new = grade(client, 75.0)  # a later submission: the one that counts
    assert deliver(client) == 1
    assert [s["scoreGiven"] for s in served.lms.scores] == [75.0]
    db = client.app.state.db
    db.run(lambda s: ops.add_override(s, s.get_one(Submission, new), 90.0, "graded by hand", "staff"))
    assert deliver(client) == 1
    db.run(lambda s: ops.add_override(s, s.get_one(Submission, old), 100.0, "an older upload", "staff"))
    assert deliver(client) == 0
    scores = served.lms.scores
    assert [s["scoreGiven"] for s in scores] == [75.0, 90.0] and scores[1]["timestamp"] > scores[0]["timestamp"]
    states = sorted(p["state"] for p in client.get("/lti/passbacks", headers=staff).json())
    assert states == ["sent", "sent", "superseded", "superseded"]


def test_deep_linking_places_an_assignment_that_students_then_launch(world: Any) -> None:
    client, served, staff = world
    served.lms.custom = {}
    data, _ = login(client, served, dl="1", role=INSTRUCTOR, sub="t1")
    r = client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]}, follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"].startswith("/signin"), r.text
    next_url = unquote(r.headers["location"].split("next=", 1)[1])
    staff_sign_in(client, staff["Authorization"].split()[1], next_url)
    assert confirm_staff_link(client, next_url).headers["location"] == "/lti/deep-link"
    page = client.get("/lti/deep-link")
    assert page.status_code == 200 and 'value="cs249/m11"' in page.text, page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf
    answer = client.post("/lti/deep-link", data={"csrf": csrf.group(1), "assignment": "cs249/m11"})
    action = re.search(r'action="([^"]+)" data-autosubmit', answer.text)
    token = re.search(r'name="JWT" value="([^"]+)"', answer.text)
    assert action and token and action.group(1) == f"{served.lms.url}/deep-link-return", answer.text
    assert f"form-action 'self' {served.lms.url}" in answer.headers["content-security-policy"]
    got = httpx2.post(action.group(1), data={"JWT": unescape(token.group(1))}).json()
    assert got == {"received": 1, "data": {"opaque": "x1"}}
    [item] = served.lms.deep_links
    assert item["type"] == "ltiResourceLink" and item["url"] == "https://testserver/lti/launch"
    assert item["custom"]["grader_link"].startswith("cs249/m11.") and item["lineItem"]["scoreMaximum"] > 0
    client.cookies.clear()  # a learner opens the new link
    served.lms.custom = item["custom"]
    r = launch(client, served, link="link-from-deep-linking")
    assert (r.status_code, r.headers["location"]) == (303, "/c/cs249/m11"), r.text


def test_a_learner_cannot_deep_link(world: Any) -> None:
    client, served, _ = world
    data, _ = login(client, served, dl="1")
    r = client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]}, follow_redirects=False)
    assert r.status_code == 400 and "only instructors" in unescape(r.text)


def opening(invite: str, config: str, token: str) -> str:
    """The invitation URL as the LMS opens it: with its configuration URL and registration token."""
    return invite.removeprefix("https://testserver") + "&" + urlencode({"openid_configuration": config,
                                                                        "registration_token": token})


def test_dynamic_registration_with_a_staff_invitation_then_a_launch(unregistered: Any) -> None:
    client, served, staff = unregistered
    r = client.get("/lti/login", params={"iss": served.lms.url, "login_hint": "u1", "client_id": CLIENT_ID})
    assert r.status_code == 400 and "no platform is registered" in unescape(r.text)
    invite = client.post("/lti/registrations", headers=staff).json()["url"]
    assert invite.startswith("https://testserver/lti/register?invite=")
    config = f"{served.lms.url}/.well-known/openid-configuration"
    opened = client.get(opening(invite, config, "reg-token-1"))
    assert opened.status_code == 200 and "registered with test-lms" in opened.text, opened.text
    assert f"frame-ancestors {served.lms.url}" in opened.headers["content-security-policy"]
    assert "x-frame-options" not in opened.headers
    [sent] = served.lms.registrations
    tool = sent["https://purl.imsglobal.org/spec/lti-tool-configuration"]
    assert sent["initiate_login_uri"] == "https://testserver/lti/login" and sent["jwks_uri"] == "https://testserver/lti/jwks"
    assert sent["redirect_uris"] == ["https://testserver/lti/launch"] and tool["domain"] == "testserver"
    assert "https://purl.imsglobal.org/spec/lti-ags/scope/score" in sent["scope"].split()
    staff_opens_the_link(client, served, staff)
    assert launch(client, served, lineitem="item-a").status_code == 303  # the new platform launches
    grade(client, 55.0)
    assert deliver(client) == 1 and served.lms.scores[0]["scoreGiven"] == 55.0
    again = client.get(opening(invite, config, "reg-token-1"))
    assert again.status_code == 400 and "used already" in unescape(again.text)


def test_a_registered_platform_is_reached_later_only_at_addresses_lti_toml_allows(unregistered: Any) -> None:
    """A dynamic registration's URLs stay the platform's word after it: its key set, token endpoint
    and line items are fetched through the same address check. Here lti.toml stops allowing the
    LMS's 127.0.0.1 (as if its name now resolved there): the launch and the passback are refused and
    say why in the staff log, while a platform an admin configured is reached as written."""
    import dataclasses

    client, served, staff = unregistered
    invite = client.post("/lti/registrations", headers=staff).json()["url"]
    config = f"{served.lms.url}/.well-known/openid-configuration"
    assert client.get(opening(invite, config, "reg-token-1")).status_code == 200
    staff_opens_the_link(client, served, staff)
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 55.0)
    app = client.app
    app.state.lti_config = dataclasses.replace(app_config(app), allow_private_networks=())  # type: ignore
    app.state.lti_tokens = Tokens()  # no access token kept from before
    refused = launch(client, served, lineitem="item-a")
    assert refused.status_code == 400 and "loopback" in unescape(refused.text), refused.text
    assert deliver(client) == 0 and served.lms.scores == []
    events = client.get("/lti/events", headers=staff).json()
    assert any(e["kind"] == "passback_failed" and "lti.toml does not allow" in e["detail"] for e in events), events
    app.state.lti_config = dataclasses.replace(app_config(app), allow_private_networks=(  # type: ignore
        ipaddress.ip_network("127.0.0.1/32"),))
    assert launch(client, served, lineitem="item-a").status_code == 303


FAILED = re.compile(r"registration failed\. .*reference for course staff: LTI event (\d+)\.", re.S)


def failure_detail(client: TestClient, staff: dict[str, str], r: Any) -> str:
    """A failed registration's page says only that; its event in the staff log says why."""
    assert r.status_code == 400, r.text
    found = FAILED.search(unescape(r.text))
    assert found, r.text
    [event] = [e for e in client.get("/lti/events", headers=staff).json() if e["id"] == int(found.group(1))]
    assert event["kind"] == "registration_failed"
    return str(event["detail"])


@pytest.mark.parametrize("invite, config, page, detail", [
    ("forged.0123", "{lms}/.well-known/openid-configuration", "not valid or has expired", ""),
    (None, "", "no openid_configuration URL", ""),
    (None, "http://127.0.0.1:1/.well-known/openid-configuration", "", "could not be reached (ConnectError)"),
    (None, "{lms}/.well-known/openid-configuration?x=1", "", "OpenID configuration answered 401"),
])
def test_dynamic_registration_refuses_what_it_cannot_trust(unregistered: Any, invite: str | None, config: str,
                                                           page: str, detail: str) -> None:
    client, served, staff = unregistered
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    if invite is not None:
        url = "/lti/register?" + urlencode({"invite": invite})
    r = client.get(opening(url, config.format(lms=served.lms.url), "wrong-token" if "x=1" in config else "reg-token-1"))
    if page:  # the invitation itself is refused: nothing was asked of anyone
        assert r.status_code == 400 and page in unescape(r.text), r.text
        assert served.lms.configuration_requests == 0
    else:
        assert detail in failure_detail(client, staff, r)
    assert served.lms.registrations == []


def test_the_staff_dashboard_shows_scores_the_lms_has_not_taken_and_sends_them_again(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 64.0)
    served.lms.down = True
    assert deliver(client) == 0
    client.cookies.clear()
    staff_sign_in(client, staff["Authorization"].split()[1], "/staff")
    page = client.get("/staff/c/cs249/m11")
    text = unescape(re.sub(r"<[^>]+>", " ", page.text))
    assert "LMS gradebook" in text and "0 sent" in text and "1 failed" in text, text
    assert "alice@example.edu" in text and "503" in text
    csrf = re.search(r'action="/lti/passbacks/retry-now" class="inline"><input type="hidden" name="csrf" value="([^"]+)"',
                     page.text)
    assert csrf, page.text
    served.lms.down = False
    r = client.post("/lti/passbacks/retry-now", data={"csrf": csrf.group(1), "back": "/staff/c/cs249/m11"},
                    follow_redirects=False)
    assert (r.status_code, r.headers["location"]) == (303, "/staff/c/cs249/m11")
    assert [s["scoreGiven"] for s in served.lms.scores] == [64.0]
    text = unescape(re.sub(r"<[^>]+>", " ", client.get("/staff/c/cs249/m11").text))
    assert "1 sent" in text and "0 failed" in text
    forged = client.post("/lti/passbacks/retry-now", data={"csrf": "nope"}, follow_redirects=False)
    assert forged.status_code == 403


def test_a_score_is_held_until_the_policy_releases_the_total_then_sent(world: Any) -> None:
    client, served, staff = world
    later = (utcnow() + timedelta(days=2)).isoformat()
    r = client.patch("/api/courses/cs249/assignments/m11", headers=staff,
                     json={"due_at": later, "policy": {"total": "after_due_date"}})
    assert r.status_code == 200, r.text
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 81.0)
    assert deliver(client) == 0 and served.lms.scores == []
    [held] = client.get("/lti/passbacks", headers=staff).json()
    assert held["state"] == "held" and "not released" in held["last_error"]
    earlier = (utcnow() - timedelta(minutes=1)).isoformat()
    assert client.patch("/api/courses/cs249/assignments/m11", headers=staff, json={"due_at": earlier}).status_code == 200
    assert deliver(client) == 1 and [s["scoreGiven"] for s in served.lms.scores] == [81.0]


def test_a_launch_still_verifies_after_the_platform_rotates_its_key(world: Any) -> None:
    client, served, _ = world
    assert launch(client, served).status_code == 303  # the tool has the platform's keyset cached now
    private, public = rsa_pem()
    served.conf.get_registration().set_platform_private_key(private).set_platform_public_key(public)
    client.cookies.clear()
    time.sleep(JWKS_REFETCH_COOLDOWN_S + 0.1)  # the tool refetches at most once per cooldown
    r = launch(client, served)  # signed with a key id the tool has not seen: it fetches the keyset again
    assert r.status_code == 303, unescape(r.text)


def test_a_score_that_arrived_although_its_answer_was_lost_is_not_sent_forever(world: Any) -> None:
    client, served, staff = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    grade(client, 72.0)
    served.lms.lose_answers = True
    assert deliver(client) == 0  # the LMS took it; the tool saw a 503
    served.lms.lose_answers = False
    time.sleep(0.05)
    assert deliver(client) == 0  # the resend is refused as old (409): it had arrived
    [pb] = client.get("/lti/passbacks", headers=staff).json()
    assert pb["state"] == "sent" and "had this score already" in pb["last_error"] and pb["attempts"] == 2
    assert [s["scoreGiven"] for s in served.lms.scores] == [72.0]
    time.sleep(0.05)
    assert deliver(client) == 0 and client.get("/lti/passbacks", params={"state": "failed"}, headers=staff).json() == []


def test_oversized_launches_and_platform_answers_are_refused_unread(unregistered: Any) -> None:
    client, served, staff = unregistered
    r = client.post("/lti/launch", data={"id_token": "x" * 200_000, "state": "s"})
    assert r.status_code == 400 and "id_token: String should have at most 65536 characters" in unescape(r.text)
    assert "xxxxxxxxxx" not in r.text and len(r.text) < 5000  # nothing echoed back
    served.lms.huge_configuration = True
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    r = client.get(opening(url, f"{served.lms.url}/.well-known/openid-configuration", "reg-token-1"))
    assert "larger than 256 kB" in failure_detail(client, staff, r) and len(r.text) < 5000


def test_an_override_stands_through_a_regrade_and_its_removal_sends_the_automatic_score(world: Any) -> None:
    client, served, _ = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    sub = grade(client, 60.0)
    assert deliver(client) == 1
    db = client.app.state.db
    db.run(lambda s: ops.add_override(s, s.get_one(Submission, sub), 90.0, "graded by hand", "staff"))
    assert deliver(client) == 1
    grade(client, 70.0, sub)  # a regrade: the staff decision still counts
    assert deliver(client) == 0
    assert [s["scoreGiven"] for s in served.lms.scores] == [60.0, 90.0]
    db.run(lambda s: ops.remove_override(s, s.get_one(Submission, sub), "staff"))
    assert deliver(client) == 1  # the regrade's automatic score, sent after all
    scores = served.lms.scores
    assert [s["scoreGiven"] for s in scores] == [60.0, 90.0, 70.0] and scores[2]["timestamp"] > scores[1]["timestamp"]


@pytest.fixture
def world12(tmp_path: Path) -> Iterator[tuple[TestClient, Served, dict[str, str]]]:
    """The same LMS course, its assignment graded as module 12 (Attention)."""
    yield from _world(tmp_path, assignment=("m12", "attention", "Attention"))


def test_a_module_12_assignment_is_launched_uploaded_graded_and_its_score_sent_back(world12: Any) -> None:
    """The second course module through LTI, end to end: a learner launches an Attention
    assignment, uploads the course's solution on its page, the embedded graders grade it with
    module 12's rubric, and the LMS receives its full marks."""
    from grader.modules import attention

    solution = Path(attention.__file__).parent / "examples" / "correct_newer.ipynb"
    client, served, _staff = world12
    r = launch(client, served, lineitem="item-12")
    assert (r.status_code, r.headers["location"]) == (303, "/c/cs249/m12"), r.text
    page = client.get("/c/cs249/m12")
    assert page.status_code == 200 and "Attention" in page.text
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf, page.text
    r = client.post("/c/cs249/m12/upload", data={"csrf": csrf.group(1)},
                    files={"file": (solution.name, solution.read_bytes())}, follow_redirects=False)
    assert r.status_code == 303, r.text
    db = client.app.state.db
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        graded = db.run(lambda s: [(g.status, g.score, g.max_score) for g in s.query(Grading).all()])
        if graded:
            break
        time.sleep(0.5)
    assert graded == [("graded", 100.0, 100.0)], graded
    assert deliver(client) == 1
    [score] = served.lms.scores
    assert (score["lineitem"], score["scoreGiven"], score["scoreMaximum"]) == ("item-12", 100.0, 100.0)
