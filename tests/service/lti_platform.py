# mypy: disable-error-code="misc,import-untyped,import-not-found,unused-ignore"
"""A test LMS built on the third-party ``lti1p3platform`` package (its Registration, platform
config, FastAPI message launch, token endpoint and AGS/NRPS service classes), served by uvicorn on
127.0.0.1. It records what the tool sends; ``down`` makes its score endpoint answer 503. With
``html`` set it answers a browser as an LMS does: ``/start`` begins a launch at the tool, and the
launch is an auto-submitting form (the library's own template)."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse
from lti1p3platform.framework.fastapi.message_launch import FastapiMessageLaunch
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
from lti1p3platform.message_launch import LTIAdvantageMessageLaunchAbstract
from lti1p3platform.registration import Registration
from lti1p3platform.request import Request as LtiRequest
from lti1p3platform.score import UpdateScoreStatus
from lti1p3platform.service_connector import AssignmentsGradesService

CLIENT_ID, DEPLOYMENT = "grader-tool", "deployment-1"


def rsa_pem() -> tuple[str, str]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.PEM,
                                           serialization.PublicFormat.SubjectPublicKeyInfo).decode()
    return private, public


class PlatformConf(LTI1P3PlatformConfAbstract):
    def init_platform_config(self, **kwargs: Any) -> None:
        self._registration = kwargs["registration"]

    def get_registration_by_params(self, **kwargs: Any) -> Registration:
        return self._registration  # type: ignore[return-value]


class Launch(LTIAdvantageMessageLaunchAbstract, FastapiMessageLaunch):
    """The library's launch with its deep-linking support; JSON for tests that post it themselves."""

    html = False

    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> Any:
        return FastapiMessageLaunch.render_launch_form(self, launch_data) if self.html else JSONResponse(launch_data)


class Fields(LtiRequest):
    def build_metadata(self, request: Any) -> Any:
        return request


@dataclass
class LMS:
    url: str = ""
    tool_url: str = "https://testserver"
    tool_jwks: Any = None  # callable returning the tool's JWKS (the tool runs in a TestClient)
    html: bool = False  # answer launches with the auto-submitting form a browser follows
    custom: dict[str, str] = field(default_factory=dict)  # the link's custom parameters
    deep_links: list[dict[str, Any]] = field(default_factory=list)  # content items received
    registrations: list[dict[str, Any]] = field(default_factory=list)  # dynamic registration requests
    configuration_requests: int = 0  # how often the OpenID configuration was asked for
    huge_configuration: bool = False  # answer the OpenID configuration with 1 MB
    configuration_changes: dict[str, Any] = field(default_factory=dict)  # merged into the OpenID configuration
    registration_changes: dict[str, Any] = field(default_factory=dict)  # merged into the registration answer
    down: bool = False
    lose_answers: bool = False  # take scores, but answer 503 (the answer is lost on the way back)
    scores: list[dict[str, Any]] = field(default_factory=list)  # (headers, body) of each accepted score
    refused: list[str] = field(default_factory=list)
    lineitems: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: int = 0
    token_answer: Any = None  # answer token requests with this (JSON) instead of a token
    lineitem_answer: Any = None  # answer line item creation with this (JSON) instead of the new item
    members: list[dict[str, Any]] = field(default_factory=list)

    def registration(self, private: str, public: str) -> Registration:
        return (Registration().set_iss(self.url).set_client_id(CLIENT_ID).set_deployment_id(DEPLOYMENT)
                .set_launch_url(f"{self.tool_url}/lti/launch").set_oidc_login_url(f"{self.tool_url}/lti/login")
                .set_deeplink_launch_url(f"{self.tool_url}/lti/launch")
                .set_platform_private_key(private).set_platform_public_key(public))


def lti_toml(lms: LMS, base_url: str, passback_delay_s: float, registered: bool = True,
             allow: tuple[str, ...] = ("127.0.0.1/32",)) -> str:
    """The tool's ``lti.toml`` with this LMS registered (or, ``registered=False``, only the tool).
    ``allow``: the private networks a dynamic registration may reach (this LMS is on 127.0.0.1)."""
    platform = f"""
[[platform]]
issuer = "{lms.url}"
client_id = "{CLIENT_ID}"
deployment_ids = ["{DEPLOYMENT}"]
auth_login_url = "{lms.url}/auth"
auth_token_url = "{lms.url}/token"
jwks_url = "{lms.url}/jwks"
"""
    return f"""
[tool]
base_url = "{base_url}"
passback_base_delay_s = {passback_delay_s}
allow_private_networks = [{", ".join(f'"{a}"' for a in allow)}]
{platform if registered else ""}"""


def build_app(lms: LMS) -> tuple[FastAPI, PlatformConf]:
    private, public = rsa_pem()
    conf = PlatformConf(registration=lms.registration(private, public))
    app = FastAPI()

    @app.get("/jwks")
    def jwks() -> Any:
        return conf.get_jwks()

    @app.get("/auth")
    def auth(request: Request) -> Any:
        q = dict(request.query_params) | dict(parse_qsl(request.query_params.get("lti_message_hint", "")))
        launch = Launch(request, conf)  # type: ignore[arg-type]
        launch.html = lms.html
        launch.set_user_data(q.get("sub", "lms-user-1"), [q.get("role", "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner")],
                             full_name="Alice Liddell", email_address="alice@example.edu")
        launch.set_launch_context_claim(q.get("context", "ctx-1"), context_title="ML Systems")
        launch.set_resource_link_claim(q.get("link", "link-1"))
        if lms.custom:
            launch.set_custom_parameters_claim(dict(lms.custom))
        if q.get("dl"):
            launch.set_dl(f"{lms.url}/deep-link-return", title="Add a grader assignment", extra_data={"opaque": "x1"})
        ags: dict[str, Any] = {"scope": ["https://purl.imsglobal.org/spec/lti-ags/scope/score",
                                         "https://purl.imsglobal.org/spec/lti-ags/scope/lineitem"],
                               "lineitems": f"{lms.url}/lineitems"}
        if q.get("lineitem"):
            ags["lineitem"] = f"{lms.url}/lineitems/{q['lineitem']}"
            lms.lineitems.setdefault(q["lineitem"], {"id": ags["lineitem"], "scoreMaximum": 100})
        launch.set_extra_claims({"https://purl.imsglobal.org/spec/lti-ags/claim/endpoint": ags,
                                 "https://purl.imsglobal.org/spec/lti-nrps/claim/namesroleservice": {
                                     "context_memberships_url": f"{lms.url}/memberships", "service_versions": ["2.0"]}})
        if q.get("expired"):
            launch.set_id_token_expiration(-120)
        return launch.lti_launch()

    @app.get("/start")
    def start(request: Request) -> Any:
        """A link in the LMS: third-party login initiation at the tool (the browser follows it)."""
        query = urlencode({"iss": lms.url, "client_id": CLIENT_ID, "login_hint": "u1",
                           "target_link_uri": f"{lms.tool_url}/lti/launch",
                           "lti_message_hint": urlencode(dict(request.query_params))})
        return RedirectResponse(f"{lms.tool_url}/lti/login?{query}", status_code=302)

    @app.post("/deep-link-return")
    async def deep_link_return(request: Request) -> Any:
        form = {k: str(v) for k, v in (await request.form()).items()}
        conf.get_registration().set_tool_key_set(lms.tool_jwks())
        claims = conf.tool_validate_and_decode(form["JWT"])
        if claims.get("aud") not in (lms.url, [lms.url]) or claims.get("iss") != CLIENT_ID:
            return JSONResponse({"error": "not for this platform"}, status_code=400)
        items = conf.validate_deeplinking_resp({"JWT": form["JWT"]})
        lms.deep_links.extend(items)
        return {"received": len(items), "data": claims.get("https://purl.imsglobal.org/spec/lti-dl/claim/data")}

    # LTI Dynamic Registration (the library has none: these two answer as its spec describes)
    @app.get("/.well-known/openid-configuration")
    def openid_configuration(request: Request) -> Any:
        lms.configuration_requests += 1
        if request.headers.get("authorization") != "Bearer reg-token-1":
            return JSONResponse({"error": "registration token required"}, status_code=401)
        if lms.huge_configuration:
            return {"issuer": lms.url, "padding": "x" * 1_000_000}
        return {"issuer": lms.url, "authorization_endpoint": f"{lms.url}/auth", "token_endpoint": f"{lms.url}/token",
                "jwks_uri": f"{lms.url}/jwks", "registration_endpoint": f"{lms.url}/register",
                "token_endpoint_auth_methods_supported": ["private_key_jwt"], "response_types_supported": ["id_token"],
                "id_token_signing_alg_values_supported": ["RS256"], "scopes_supported": ["openid"],
                "https://purl.imsglobal.org/spec/lti-platform-configuration": {
                    "product_family_code": "test-lms", "version": "1",
                    "messages_supported": [{"type": "LtiResourceLinkRequest"}, {"type": "LtiDeepLinkingRequest"}]}
        } | lms.configuration_changes

    @app.post("/register")
    async def register(request: Request) -> Any:
        if request.headers.get("authorization") != "Bearer reg-token-1":
            return JSONResponse({"error": "registration token required"}, status_code=401)
        body = await request.json()
        lms.registrations.append(body)
        return body | {"client_id": CLIENT_ID, "https://purl.imsglobal.org/spec/lti-tool-configuration":
                       body["https://purl.imsglobal.org/spec/lti-tool-configuration"] | {"deployment_id": DEPLOYMENT}
                       } | lms.registration_changes

    @app.get("/gradebook")
    def gradebook() -> Any:
        return {"scores": lms.scores}

    @app.post("/token")
    async def token(request: Request) -> Any:
        form = {k: str(v) for k, v in (await request.form()).items()}
        lms.token_requests += 1
        if lms.token_answer is not None:
            return JSONResponse(lms.token_answer)
        conf.get_registration().set_tool_key_set(lms.tool_jwks())
        claims = conf.tool_validate_and_decode(form["client_assertion"])  # the library skips aud: we check it
        if claims.get("aud") != f"{lms.url}/token" or claims.get("iss") != CLIENT_ID or claims.get("sub") != CLIENT_ID:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        return conf.get_access_token(form)

    class Grades(AssignmentsGradesService):
        def find_lineitems(self, **kwargs: Any) -> Any: return {"content": list(lms.lineitems.values()), "has_next": False}
        def find_lineitem(self, line_item_id: str) -> Any: return lms.lineitems[line_item_id]
        def create_lineitem(self, creation_data: Any) -> Any:
            item_id = f"item{len(lms.lineitems) + 1}"
            lms.lineitems[item_id] = creation_data | {"id": f"{lms.url}/lineitems/{item_id}"}
            return lms.lineitems[item_id]
        def update_lineitem(self, update_data: Any) -> Any: return update_data
        def delete_lineitem(self, line_item_id: str) -> None: return None
        def get_results(self, line_item_id: str, **kwargs: Any) -> Any: return {"content": [], "has_next": False}
        def update_score(self, line_item_id: str, score: Any) -> UpdateScoreStatus:
            previous = [s for s in lms.scores if s["lineitem"] == line_item_id and s["userId"] == score["userId"]]
            if previous and previous[-1]["timestamp"] >= score["timestamp"]:
                return UpdateScoreStatus.OLD_TIMESTAMP
            lms.scores.append(score | {"lineitem": line_item_id})
            return UpdateScoreStatus.SUCCESS

    async def service(request: Request) -> Grades:
        body = await request.json() if request.method == "POST" else None
        fields = {"method": request.method, "form_data": {}, "get_data": dict(request.query_params),
                  "headers": request.headers, "content_type": request.headers.get("content-type"),
                  "path": request.url.path, "json": body}
        return Grades(Fields(fields), conf, f"{lms.url}/lineitems")

    def answer(resp: Any) -> JSONResponse:
        return JSONResponse(resp.result if resp.result is not None else {"message": resp.message},
                            status_code=resp.code)

    @app.post("/lineitems")
    async def create(request: Request) -> Any:
        if request.headers.get("content-type") != "application/vnd.ims.lis.v2.lineitem+json":
            return JSONResponse({"error": "line item media type required"}, status_code=415)
        if lms.lineitem_answer is not None:
            return JSONResponse(lms.lineitem_answer, status_code=201)
        grades = await service(request)
        return answer(grades.handle_resp(grades.handle_create_lineitem))

    @app.post("/lineitems/{item}/scores")
    async def score(item: str, request: Request) -> Any:
        if lms.down:
            return JSONResponse({"error": "maintenance"}, status_code=503)
        if request.headers.get("content-type") != "application/vnd.ims.lis.v1.score+json":
            lms.refused.append(f"media type {request.headers.get('content-type')}")
            return JSONResponse({"error": "score media type required"}, status_code=415)
        grades = await service(request)
        taken = answer(grades.handle_resp(grades.handle_update_score, line_item_id=item))
        return JSONResponse({"error": "gateway timeout"}, status_code=503) if lms.lose_answers else taken

    @app.get("/memberships")
    def memberships(request: Request) -> Any:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if not conf.validate_token(token, ["https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly"]):
            return JSONResponse({"error": "scope"}, status_code=403)
        return {"id": f"{lms.url}/memberships", "context": {"id": "ctx-1"}, "members": lms.members}

    return app, conf


class Served:
    """The LMS under uvicorn on a free 127.0.0.1 port, in a thread; ``stop`` ends it."""

    def __init__(self, lms: LMS) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        lms.url = f"http://127.0.0.1:{port}"
        self.lms = lms
        self.app, self.conf = build_app(lms)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.02)

    def sign(self, claims: dict[str, Any], key: str | None = None) -> str:
        """An id_token signed by the platform's key (or ``key``), with the platform's kid."""
        reg = self.conf.get_registration()
        return jwt.encode(claims, key or reg.get_platform_private_key(), algorithm="RS256",
                          headers={"kid": reg.get_kid()})

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
