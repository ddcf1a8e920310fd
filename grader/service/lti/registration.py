"""Platforms: those registered by configuration (``lti.toml``), and those registered by LTI
Dynamic Registration. Staff make an invitation (a signed URL, valid a day, usable once); the
LMS admin pastes it into the LMS, which opens it with its ``openid_configuration`` URL and a
registration token. The tool reads the platform's configuration (its issuer and its
registration endpoint must be on the configuration URL's own site), posts its client
registration, and keeps the client id and deployment id the platform answers with.

Those URLs come from whoever holds the invitation, so: the first attempt uses the invitation up
(it registers or not), the tool connects to no loopback, link-local or private address unless
``lti.toml`` allows its network (``network.py``), and the page the LMS shows says only that the
registration failed, with a reference to the staff log's event that says why."""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlparse

import httpx2
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from ...errors import LaunchRejected
from ...results.lti_tables import LtiInvitation, LtiPlatform
from .checks import shown, web_url
from .config import LtiConfig, Platform
from .links import seal, unseal
from .network import AddressRefused

INVITE = "lti-registration"
INVITE_TTL_S = 24 * 3600
TOOL_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-tool-configuration"
PLATFORM_CONFIGURATION = "https://purl.imsglobal.org/spec/lti-platform-configuration"
SCOPES = ("https://purl.imsglobal.org/spec/lti-ags/scope/lineitem",
          "https://purl.imsglobal.org/spec/lti-ags/scope/result.readonly",
          "https://purl.imsglobal.org/spec/lti-ags/scope/score",
          "https://purl.imsglobal.org/spec/lti-nrps/scope/contextmembership.readonly")
TOOL_NAME = "TinyTorch grader"
MAX_DOCUMENT = 256 * 1024
MAX_ID = 255  # lti_platforms.issuer and client_id; a deployment id is kept to this too


def _identifier(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool) and 0 < len(str(value)) <= MAX_ID


def _object(document: dict[str, Any], name: str) -> dict[str, Any]:
    found = document.get(name)
    return found if isinstance(found, dict) else {}


def find_platform(session: Session, config: LtiConfig, issuer: str, client_id: str | None = None) -> Platform | None:
    """The registration of this issuer (and client id): the configured one, else a dynamic one."""
    configured = config.platform(issuer, client_id)
    if configured is not None:
        return configured
    query = select(LtiPlatform).where(LtiPlatform.issuer == issuer)
    if client_id is not None:
        query = query.where(LtiPlatform.client_id == client_id)
    row = session.scalars(query.order_by(LtiPlatform.id).limit(1)).first()
    if row is None:
        return None
    return Platform(issuer=row.issuer, client_id=row.client_id,
                    deployment_ids=tuple(json.loads(row.deployment_ids_json)), auth_login_url=row.auth_login_url,
                    auth_token_url=row.auth_token_url, jwks_url=row.jwks_url, registered=True)


def invitation_url(config: LtiConfig, secret: bytes, staff: str) -> str:
    value = seal(secret, INVITE, {"rid": secrets.token_hex(16), "by": staff}, INVITE_TTL_S)
    return f"{config.base_url.rstrip('/')}/lti/register?{urlencode({'invite': value})}"


def get_json(http: httpx2.Client, url: str, what: str, **kwargs: Any) -> dict[str, Any]:
    """The platform's JSON answer, read up to ``MAX_DOCUMENT`` bytes (a larger one is refused).
    Every failure says exactly what happened: it goes to the staff log, never to the page."""
    content = b""
    try:
        with http.stream(kwargs.pop("method", "GET"), url, **kwargs) as r:
            status = r.status_code
            for chunk in r.iter_bytes():
                content += chunk
                if len(content) > MAX_DOCUMENT:
                    raise LaunchRejected(f"the platform's {what} is larger than {MAX_DOCUMENT // 1024} kB")
    except httpx2.HTTPError as e:
        raise LaunchRejected(f"the platform's {what} could not be reached ({type(e).__name__})") from None
    except AddressRefused as e:
        raise LaunchRejected(f"the platform's {what} was not asked: {e}") from None
    if status not in (200, 201):
        raise LaunchRejected(f"the platform's {what} answered {status}")
    try:
        body = json.loads(content)
    except (ValueError, RecursionError):
        raise LaunchRejected(f"the platform's {what} is not JSON") from None
    if not isinstance(body, dict):
        raise LaunchRejected(f"the platform's {what} is not a JSON object")
    return body


def _site(url: str) -> tuple[str, str, int | None]:
    where = urlparse(url)
    try:
        port = where.port or {"https": 443, "http": 80}.get(where.scheme)
    except ValueError:
        port = None
    return where.scheme, (where.hostname or "").lower(), port


@dataclass(frozen=True)
class Invitation:
    rid: str
    by: str


def use_invitation(session: Session, secret: bytes, invite: str, openid_configuration: str) -> Invitation:
    """The invitation of a registration attempt, used up by it (whatever the attempt's outcome:
    one invitation is one attempt, so it cannot be used to try address after address)."""
    granted = unseal(secret, INVITE, invite)
    if granted is None:
        raise LaunchRejected("this registration link is not valid or has expired (links last a day): ask course "
                             "staff for a new one (POST /lti/registrations)")
    if not web_url(openid_configuration):  # nothing is asked of anyone: the invitation stays good
        raise LaunchRejected("the registration request has no openid_configuration URL: open this link from the "
                             "LMS's “register a tool by URL” field")
    rid, by = str(granted["rid"]), str(granted.get("by", ""))
    used = session.scalar(select(LtiPlatform.id).where(LtiPlatform.registration_id == rid)) is not None
    if not used:
        try:
            with session.begin_nested():
                session.add(LtiInvitation(id=rid, made_by=by[:64]))
        except IntegrityError:
            used = True
    if used:
        raise LaunchRejected("this registration link was used already: ask course staff for a new one")
    return Invitation(rid, by)


@dataclass(frozen=True)
class Answered:
    """What the platform said: its configuration and its answer to the registration."""

    found: dict[str, Any]
    client_id: str
    deployment: str | None


def ask_platform(config: LtiConfig, openid_configuration: str, registration_token: str,
                 http: httpx2.Client) -> Answered:
    """Read the platform's configuration and post the tool's registration to it (no store is open
    meanwhile). Only addresses ``lti.toml`` allows are connected to (``guarded_client``), and the
    registration endpoint must be on the configuration's own site."""
    if not web_url(openid_configuration):
        raise LaunchRejected("the registration request has no openid_configuration URL")
    auth = {"Authorization": f"Bearer {registration_token}"} if registration_token else {}
    found = get_json(http, openid_configuration, "OpenID configuration", headers=auth)
    issuer = found.get("issuer")
    if not isinstance(issuer, str) or len(issuer) > MAX_ID or not web_url(issuer):
        raise LaunchRejected(f"the platform's issuer {shown(issuer)} is not an http(s) URL of at most {MAX_ID} "
                             f"characters")
    if _site(issuer) != _site(openid_configuration):
        raise LaunchRejected(f"the platform's issuer {shown(issuer)} is not the site of its configuration URL")
    needed = ("authorization_endpoint", "token_endpoint", "jwks_uri", "registration_endpoint")
    if any(not web_url(found.get(k)) for k in needed):
        raise LaunchRejected(f"the platform's configuration lacks one of {', '.join(needed)} (an http(s) URL each)")
    if _site(found["registration_endpoint"]) != _site(openid_configuration):
        raise LaunchRejected(f"the platform's registration_endpoint {shown(found['registration_endpoint'])} is not "
                             f"on the site of its configuration URL {shown(openid_configuration)}")
    base = config.base_url.rstrip("/")
    launch = f"{base}/lti/launch"
    request = {
        "application_type": "web", "response_types": ["id_token"], "grant_types": ["implicit", "client_credentials"],
        "initiate_login_uri": f"{base}/lti/login", "redirect_uris": [launch], "client_name": TOOL_NAME,
        "jwks_uri": f"{base}/lti/jwks", "token_endpoint_auth_method": "private_key_jwt", "scope": " ".join(SCOPES),
        TOOL_CONFIGURATION: {
            "domain": urlparse(base).netloc, "target_link_uri": launch, "claims": ["iss", "sub", "name", "email"],
            "messages": [{"type": "LtiDeepLinkingRequest", "target_link_uri": launch, "label": TOOL_NAME}]},
    }
    answer = get_json(http, found["registration_endpoint"], "registration endpoint", method="POST",
                       json=request, headers=auth | {"Content-Type": "application/json"})
    client_id, deployment = answer.get("client_id"), _object(answer, TOOL_CONFIGURATION).get("deployment_id")
    if not _identifier(client_id):
        raise LaunchRejected(f"the platform's registration answer has no client_id (a string of at most {MAX_ID} "
                             f"characters): {shown(client_id)}")
    if deployment is not None and not _identifier(deployment):
        raise LaunchRejected(f"the platform's deployment_id is not a string of at most {MAX_ID} characters: "
                             f"{shown(deployment)}")
    return Answered(found, str(client_id), str(deployment) if deployment else None)


def store_registration(session: Session, invitation: Invitation, answered: Answered) -> LtiPlatform:
    """Keep the platform that registered (its client id and deployment)."""
    found = answered.found
    product = _object(found, PLATFORM_CONFIGURATION).get("product_family_code", "")
    row = LtiPlatform(registration_id=invitation.rid, issuer=found["issuer"], client_id=answered.client_id,
                      deployment_ids_json=json.dumps([answered.deployment] if answered.deployment else []),
                      auth_login_url=found["authorization_endpoint"], auth_token_url=found["token_endpoint"],
                      jwks_url=found["jwks_uri"], registered_by=invitation.by[:64], product=str(product)[:200])
    try:
        with session.begin_nested():
            session.add(row)
    except IntegrityError:
        raise LaunchRejected(f"the platform {shown(found['issuer'])} has registered client "
                             f"{shown(answered.client_id)} already") from None
    return row
