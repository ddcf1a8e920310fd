# mypy: disable-error-code="misc,import-untyped,import-not-found,unused-ignore"
"""A test LMS built on the third-party ``lti1p3platform`` package (its Registration, platform
config, FastAPI message launch, token endpoint and AGS/NRPS service classes), served by uvicorn on
127.0.0.1. It records what the tool sends; ``down`` makes its score endpoint answer 503."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from lti1p3platform.framework.fastapi.message_launch import FastapiMessageLaunch
from lti1p3platform.ltiplatform import LTI1P3PlatformConfAbstract
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


class Launch(FastapiMessageLaunch):
    def render_launch_form(self, launch_data: dict[str, Any], **kwargs: Any) -> JSONResponse:
        return JSONResponse(launch_data)


class Fields(LtiRequest):
    def build_metadata(self, request: Any) -> Any:
        return request


@dataclass
class LMS:
    url: str = ""
    tool_jwks: Any = None  # callable returning the tool's JWKS (the tool runs in a TestClient)
    down: bool = False
    scores: list[dict[str, Any]] = field(default_factory=list)  # (headers, body) of each accepted score
    refused: list[str] = field(default_factory=list)
    lineitems: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: int = 0
    members: list[dict[str, Any]] = field(default_factory=list)

    def registration(self, private: str, public: str) -> Registration:
        return (Registration().set_iss(self.url).set_client_id(CLIENT_ID).set_deployment_id(DEPLOYMENT)
                .set_launch_url("https://testserver/lti/launch").set_oidc_login_url("https://testserver/lti/login")
                .set_platform_private_key(private).set_platform_public_key(public))


def build_app(lms: LMS) -> tuple[FastAPI, PlatformConf]:
    private, public = rsa_pem()
    conf = PlatformConf(registration=lms.registration(private, public))
    app = FastAPI()

    @app.get("/jwks")
    def jwks() -> Any:
        return conf.get_jwks()

    @app.get("/auth")
    def auth(request: Request) -> Any:
        q = request.query_params
        launch = Launch(request, conf)  # type: ignore[arg-type]
        launch.set_user_data(q.get("sub", "lms-user-1"), [q.get("role", "http://purl.imsglobal.org/vocab/lis/v2/membership#Learner")],
                             full_name="Alice Liddell", email_address="alice@example.edu")
        launch.set_launch_context_claim("ctx-1", context_title="ML Systems")
        launch.set_resource_link_claim(q.get("link", "link-1"))
        launch.set_custom_parameters_claim({"course": "cs249", "assignment": "m11"})
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

    @app.post("/token")
    async def token(request: Request) -> Any:
        form = {k: str(v) for k, v in (await request.form()).items()}
        lms.token_requests += 1
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
        return answer(grades.handle_resp(grades.handle_update_score, line_item_id=item))

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
