"""The LTI tool attacked: by a learner who reads their own launch, by an instructor of another LMS
course on the same platform, by a platform that sends claims of the wrong shape or a return URL
that is not a web page, and by other web pages."""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest

from grader.service.lti.launch import is_staff
from tests.service.test_lti import (
    INSTRUCTOR,
    _world,
    claims_of,
    deliver,
    failure_detail,
    grade,
    launch,
    login,
    opening,
    staff_sign_in,
)

CLAIM = "https://purl.imsglobal.org/spec/lti/claim/"
DL = "https://purl.imsglobal.org/spec/lti-dl/claim/deep_linking_settings"


@pytest.fixture
def world(tmp_path: Path) -> Iterator[Any]:
    """The tool and a registered platform (tests/service/test_lti.py), course cs249 with m11."""
    yield from _world(tmp_path)


@pytest.fixture
def unregistered(tmp_path: Path) -> Iterator[Any]:
    """The tool with no platform in lti.toml (one comes by dynamic registration)."""
    yield from _world(tmp_path, registered=False)


def post_signed(client: Any, served: Any, change: dict[str, Any], **extra: str) -> Any:
    """A launch whose id_token the platform signed with ``change`` applied to its claims."""
    data, _ = login(client, served, **extra)
    token = served.sign(claims_of(data["id_token"]) | change)
    return client.post("/lti/launch", data={"id_token": token, "state": data["state"]}, follow_redirects=False)


@pytest.mark.parametrize("change", [
    {CLAIM + "custom": ["grader_link"]},
    {CLAIM + "context": "ctx-1"},
    {CLAIM + "resource_link": ["link-1"]},
    {CLAIM + "context": {"id": ["ctx-1"]}},
    {CLAIM + "roles": "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"},
    {CLAIM + "lis": "sourcedid"},
    {"name": {"given": "Alice"}},
    {"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": ["lineitems"]},
    {"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {"lineitem": 5}},
    {"https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": "members"},
    {"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": {"lineitem": "file:///etc/passwd"}},
    {"name": "A" * 5000},
    {"sub": "u" * 300},
])
def test_claims_of_the_wrong_shape_are_refused_with_a_page_not_a_500(world: Any, change: dict[str, Any]) -> None:
    client, served, _ = world
    r = post_signed(client, served, change)
    assert r.status_code == 400 and "could not be accepted" in unescape(r.text), r.text


@pytest.mark.parametrize("return_url", [
    "javascript:alert(document.domain)//",
    "https://lms.example;script-src 'unsafe-inline' *;/deep-link-return",  # into the answer's CSP header
    "https://user:pass@lms.example/deep-link-return",
    "data:text/html,<script>alert(1)</script>",
])
def test_a_deep_link_return_url_that_is_not_a_plain_web_address_is_refused(world: Any, return_url: str) -> None:
    client, served, _ = world
    data, _ = login(client, served, dl="1", role=INSTRUCTOR, sub="t1")
    claims = claims_of(data["id_token"])
    claims[DL] = claims[DL] | {"deep_link_return_url": return_url}
    r = client.post("/lti/launch", data={"id_token": served.sign(claims), "state": data["state"]},
                    follow_redirects=False)
    assert r.status_code == 400 and "deep_link_return_url is not an http(s) URL" in unescape(r.text), r.text
    assert "grader_lti_dl" not in r.cookies


def test_a_grader_link_read_from_a_launch_cannot_attach_another_lms_course(world: Any) -> None:
    """Every learner sees the link's signed grader_link in their id_token; in a sandbox LMS course of
    their own (or as an instructor of another course on the platform) they put it on a link."""
    client, served, staff = world
    data, _ = login(client, served)
    leaked = claims_of(data["id_token"])[CLAIM + "custom"]["grader_link"]
    client.cookies.clear()
    served.lms.custom = {"grader_link": leaked}
    for role in ("http://purl.imsglobal.org/vocab/lis/v2/membership%23Learner", INSTRUCTOR):
        r = launch(client, served, context="sandbox", sub="friend", role=role)
        if r.status_code == 303:  # an instructor is asked for a staff token: without one, nothing is linked
            assert r.headers["location"].startswith("/signin?"), r.headers
        else:
            assert r.status_code == 400 and "course staff open this link" in unescape(r.text), r.text
        client.cookies.clear()
    r = launch(client, served, context="sandbox", sub="friend")
    assert r.status_code == 400, r.headers
    assert client.get("/api/courses/cs249/students", headers=staff).json() == []


LEARNER_ROLE = "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner"


@pytest.mark.parametrize("members", [
    [{"roles": [LEARNER_ROLE], "name": "No Id"}],
    [{"user_id": "u2", "roles": LEARNER_ROLE}],
    [{"user_id": "u2", "roles": [LEARNER_ROLE], "name": {"given": "Bob"}}],
    [{"user_id": "u2", "roles": [LEARNER_ROLE], "email": "b" * 5000}],
    ["u2"],
])
def test_a_roster_of_the_wrong_shape_is_refused_with_a_message_not_a_500(world: Any, members: list[Any]) -> None:
    client, served, staff = world
    assert launch(client, served).status_code == 303
    served.lms.members = members
    r = client.post("/lti/courses/cs249/roster/sync", headers=staff)
    assert r.status_code == 422 and "member 1 of the LMS roster" in r.text, r.text
    ids = [s["student_id"] for s in client.get("/api/courses/cs249/students", headers=staff).json()]
    assert ids == ["alice@example.edu"]  # nothing half-imported


@pytest.mark.parametrize("extra_role", [
    "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Instructor",  # teaches elsewhere (Canvas sends it)
    "http://purl.imsglobal.org/vocab/lis/v2/institution/person#Administrator",
    "http://purl.imsglobal.org/vocab/lis/v2/system/person#Administrator",
    "http://purl.imsglobal.org/vocab/lis/v2/membership/Learner#Instructor",  # a sub-role of Learner
])
def test_only_a_role_in_this_course_makes_an_instructor(world: Any, extra_role: str) -> None:
    """A learner of this course who holds a staff role elsewhere (the institution, the LMS site) is
    its student: the launch signs them in to submit, not to a staff sign-in they cannot pass."""
    client, served, staff = world
    r = post_signed(client, served, {CLAIM + "roles": [LEARNER_ROLE, extra_role]})
    assert (r.status_code, r.headers.get("location")) == (303, "/c/cs249/m11"), r.text
    assert [s["student_id"] for s in client.get("/api/courses/cs249/students", headers=staff).json()] == [
        "alice@example.edu"]


@pytest.mark.parametrize("role", [
    "http://purl.imsglobal.org/vocab/lis/v2/membership#Instructor",
    "http://purl.imsglobal.org/vocab/lis/v2/membership/Instructor#TeachingAssistant",
    "http://purl.imsglobal.org/vocab/lis/v2/membership#ContentDeveloper",
    "Instructor",
])
def test_course_staff_roles_still_make_an_instructor(role: str) -> None:
    assert is_staff(["http://purl.imsglobal.org/vocab/lis/v2/system/person#User", role])


def test_a_page_cannot_make_a_signed_in_staff_browser_link_someone_elses_lms_account(world: Any) -> None:
    """A hostile platform (or anyone who can get a launch of theirs into a staff member's browser)
    starts an instructor launch as 'mallory' there, then sends the browser to /lti/staff-link: the
    GET must not link mallory's LMS account to the staff member signed in."""
    client, served, staff = world
    staff_sign_in(client, staff["Authorization"].split()[1], "/staff")  # the victim, signed in to the grader
    r = launch(client, served, role=INSTRUCTOR, sub="mallory", context="ctx-evil")
    assert r.status_code == 303 and r.headers["location"].startswith("/signin?"), r.text
    then = unquote(r.headers["location"].split("next=", 1)[1])
    page = client.get(then, follow_redirects=False)  # the hostile page navigates the browser there
    assert page.status_code == 200 and "Link" in page.text, page.text
    forged = client.post("/lti/staff-link", data={"csrf": "nope", "then": "/staff"}, follow_redirects=False)
    assert forged.status_code == 403
    client.cookies.clear()  # mallory, in her own browser, launches again: no staff session for her
    again = launch(client, served, role=INSTRUCTOR, sub="mallory", context="ctx-evil")
    assert again.status_code == 303 and again.headers["location"].startswith("/signin?"), again.headers
    assert client.get("/staff", follow_redirects=False).status_code == 303


def test_an_unsigned_request_cannot_fill_the_event_log_or_echo_megabytes(world: Any) -> None:
    """/lti/login takes anyone's request, and a refused one is kept for staff: what is kept (and
    shown) of the request's own values is short."""
    client, _, staff = world
    huge = "https://x" + "x" * 300_000
    r = client.post("/lti/login", data={"iss": huge, "login_hint": "u1", "client_id": "c" * 100_000})
    assert r.status_code == 400 and "no platform is registered" in unescape(r.text), r.text[:300]
    assert len(r.text) < 5000
    [event] = [e for e in client.get("/lti/events", headers=staff).json() if e["kind"] == "login_rejected"]
    assert len(event["issuer"]) <= 255 and len(event["detail"]) < 1000, (len(event["issuer"]), len(event["detail"]))


TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"


@pytest.mark.parametrize("configuration, registration", [
    ({"issuer": "{lms}/" + "x" * 300}, {}),
    ({"authorization_endpoint": "javascript:alert(document.domain)"}, {}),
    ({"jwks_uri": "file:///etc/passwd"}, {}),
    ({}, {"client_id": ["grader-tool", "other"]}),
    ({}, {"client_id": "c" * 300}),
    ({}, {TOOL_CONFIGURATION: {"deployment_id": {"id": "d1"}}}),
    ({"https://purl.imsglobal.org/spec/lti-platform-configuration": ["test-lms"]}, {"client_id": None}),
])
def test_a_registration_answer_of_the_wrong_shape_registers_nothing(unregistered: Any, configuration: dict[str, Any],
                                                                     registration: dict[str, Any]) -> None:
    client, served, staff = unregistered
    served.lms.configuration_changes = {k: v.format(lms=served.lms.url) if isinstance(v, str) else v
                                        for k, v in configuration.items()}
    served.lms.registration_changes = registration
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    r = client.get(opening(url, f"{served.lms.url}/.well-known/openid-configuration", "reg-token-1"))
    assert r.status_code == 400 and "could not register" in unescape(r.text), r.text
    assert len(r.text) < 5000
    r = client.get("/lti/login", params={"iss": served.lms.url, "login_hint": "u1"})
    assert r.status_code == 400 and "no platform is registered" in unescape(r.text)


@pytest.mark.parametrize("answer", [{"token": "x"}, {"access_token": ["x"]}, {"access_token": "x", "expires_in": [1]},
                                    ["access_token"]])
def test_a_token_answer_of_the_wrong_shape_fails_the_passback_and_the_roster_sync_with_a_message(
        world: Any, answer: Any) -> None:
    client, served, staff = world
    assert launch(client, served, lineitem="item-a").status_code == 303
    served.lms.token_answer = answer
    r = client.post("/lti/courses/cs249/roster/sync", headers=staff)
    assert r.status_code == 422 and "access token" in r.text, r.text
    grade(client, 50.0)
    assert deliver(client) == 0
    [failed] = client.get("/lti/passbacks", params={"state": "failed"}, headers=staff).json()
    assert "access token" in failed["last_error"], failed


@pytest.mark.parametrize("answer", [["item"], {"label": "no id"}, {"id": "javascript:alert(1)"}])
def test_a_line_item_answer_without_a_url_fails_the_passback_with_a_message(world: Any, answer: Any) -> None:
    client, served, staff = world
    assert launch(client, served).status_code == 303  # no line item: the first passback creates one
    served.lms.lineitem_answer = answer
    grade(client, 50.0)
    assert deliver(client) == 0
    [failed] = client.get("/lti/passbacks", params={"state": "failed"}, headers=staff).json()
    assert "no http(s) URL as its id" in failed["last_error"], failed


@pytest.mark.parametrize("claims", [
    {"email": "alice@example.edu"},  # Moodle with allowaccountssameemail: two accounts, one address
    {"email": "", CLAIM + "lis": {"person_sourcedid": "alice@example.edu"}},  # an SIS id that is her id
])
def test_a_second_lms_account_cannot_take_over_a_student_another_account_launched_as(world: Any,
                                                                                   claims: dict[str, Any]) -> None:
    client, served, staff = world
    assert launch(client, served).status_code == 303  # alice (LMS user lms-user-1) is student alice@example.edu
    client.cookies.clear()
    r = post_signed(client, served, {"sub": "lms-user-2", "name": "Mallory"} | claims)
    assert r.status_code == 400 and "another LMS account" in unescape(r.text), r.headers
    assert client.get("/c/cs249/m11", follow_redirects=False).status_code == 303  # not signed in as alice
    served.lms.members = [{"user_id": "lms-user-2", "roles": [LEARNER_ROLE], "name": "Mallory",
                           "email": "alice@example.edu"}]
    sync = client.post("/lti/courses/cs249/roster/sync", headers=staff)  # the roster import does not either
    assert sync.status_code == 200 and sync.json()["conflicts"] == 1, sync.text


# ---- dynamic registration is no way to reach the tool's own network -----------------------------

CONFIGURATION = "/.well-known/openid-configuration"


@pytest.fixture
def closed(tmp_path: Path) -> Iterator[Any]:
    """The tool with no platform, and an lti.toml that allows no private network (the default)."""
    yield from _world(tmp_path, registered=False, allow=())


class Listener:
    """A TCP listener on 127.0.0.1 that keeps whatever anyone sends it (and answers nothing)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.running = True
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received += conn.recv(65536)
                except OSError:
                    pass

    def stop(self) -> None:
        self.running = False
        self.thread.join(timeout=5)
        self.sock.close()


def test_an_invitation_is_used_up_by_its_first_attempt_even_one_that_failed(unregistered: Any) -> None:
    client, served, staff = unregistered
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    failed = client.get(opening(url, served.lms.url + CONFIGURATION, "wrong-token"))
    assert "answered 401" in failure_detail(client, staff, failed)
    again = client.get(opening(url, served.lms.url + CONFIGURATION, "reg-token-1"))
    assert again.status_code == 400 and "used already" in unescape(again.text), again.text
    assert served.lms.configuration_requests == 1 and served.lms.registrations == []
    fresh = client.post("/lti/registrations", headers=staff).json()["url"]  # a new invitation works
    assert client.get(opening(fresh, served.lms.url + CONFIGURATION, "reg-token-1")).status_code == 200


def test_a_registration_endpoint_off_the_configurations_site_is_never_posted_to(unregistered: Any) -> None:
    """The attacker's configuration names a listener of the tool's own network as its registration
    endpoint, hoping for the tool's JSON with an Authorization header of their choosing."""
    client, served, staff = unregistered
    listener = Listener()
    port = served.lms.url.rsplit(":", 1)[1]
    try:
        for endpoint in (f"http://127.0.0.1:{listener.port}/admin", f"http://localhost:{port}/register",
                         f"https://{'127.0.0.1'}:{port}/register", "http://10.0.0.7/register"):
            served.lms.configuration_changes = {"registration_endpoint": endpoint}
            url = client.post("/lti/registrations", headers=staff).json()["url"]
            r = client.get(opening(url, served.lms.url + CONFIGURATION, "reg-token-1"))
            assert "registration_endpoint" in failure_detail(client, staff, r) and endpoint not in r.text
            assert "not on the site of its configuration URL" in failure_detail(client, staff, r)
    finally:
        listener.stop()
    assert listener.received == b"" and served.lms.registrations == []


@pytest.mark.parametrize("where", [
    "{lms}", "http://localhost:{port}", "http://[::1]:{port}", "http://[::ffff:127.0.0.1]:{port}", "http://10.0.0.7",
    "http://169.254.169.254", "http://192.168.1.1:8080", "http://0.0.0.0:{port}", "http://100.64.0.1",
])
def test_loopback_link_local_and_private_addresses_are_refused_unless_lti_toml_allows_them(
        closed: Any, where: str, caplog: pytest.LogCaptureFixture) -> None:
    client, served, staff = closed
    port = served.lms.url.rsplit(":", 1)[1]
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    r = client.get(opening(url, where.format(lms=served.lms.url, port=port) + CONFIGURATION, "reg-token-1"))
    detail = failure_detail(client, staff, r)
    assert "private address" in detail and "allow_private_networks" in detail, detail
    assert served.lms.configuration_requests == 0 and served.lms.registrations == []
    assert any("registration_failed" in m and "private address" in m for m in caplog.messages)  # the service log


def test_a_host_name_is_checked_by_the_addresses_it_resolves_to(closed: Any, monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    """An innocent-looking name that resolves to the tool's own network is refused (and the
    address checked is the one connected to: no second lookup can return another)."""
    client, served, staff = closed
    port = int(served.lms.url.rsplit(":", 1)[1])
    real = socket.getaddrinfo

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == "lms.example.edu" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    url = client.post("/lti/registrations", headers=staff).json()["url"]
    r = client.get(opening(url, f"http://lms.example.edu:{port}{CONFIGURATION}", "reg-token-1"))
    assert "'lms.example.edu' resolves to 127.0.0.1" in failure_detail(client, staff, r)
    assert served.lms.configuration_requests == 0


def test_the_failure_page_says_the_same_whatever_the_address_answered(unregistered: Any) -> None:
    """Refused, 401, 404, an HTML page, a private address: one page, but for its reference number."""
    client, served, staff = unregistered
    pages, details = set(), []
    for config, token in (("http://127.0.0.1:1" + CONFIGURATION, "reg-token-1"),
                          (served.lms.url + CONFIGURATION, "wrong-token"),
                          (served.lms.url + "/nothing-here", "reg-token-1"),
                          (served.lms.url + "/docs", "reg-token-1"),
                          ("http://10.0.0.7" + CONFIGURATION, "reg-token-1")):
        url = client.post("/lti/registrations", headers=staff).json()["url"]
        r = client.get(opening(url, config, token))
        details.append(failure_detail(client, staff, r))
        text = unescape(r.text)
        assert not any(word in text for word in ("401", "404", "JSON", "reached", "private", "10.0.0.7")), text
        pages.add(re.sub(r"LTI event \d+", "LTI event N", text))
    assert len(pages) == 1, pages
    assert ["could not be reached" in details[0], "answered 401" in details[1], "answered 404" in details[2],
            "not JSON" in details[3], "private address" in details[4]] == [True] * 5, details


def test_the_launch_from_the_lms_is_cross_site_and_still_accepted(world: Any) -> None:
    """The launch is a form the LMS's page posts (another site's Origin, or none): the id_token
    authenticates it, not a session, so the same-site rule of the grader's own forms is not its."""
    client, served, _ = world
    for headers in ({"Origin": served.lms.url}, {"Origin": "null"}):
        data, _ = login(client, served)
        r = client.post("/lti/launch", data={"id_token": data["id_token"], "state": data["state"]}, headers=headers,
                        follow_redirects=False)
        assert r.status_code == 303 and r.headers["location"] == "/c/cs249/m11", r.text
