"""Platform registrations, by configuration: ``lti.toml`` in the data folder (or the file named by
``GRADER_LTI_CONFIG``). Each ``[[platform]]`` is one LMS registration of this tool."""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ...errors import GraderError
from .network import Network, networks


@dataclass(frozen=True)
class Platform:
    issuer: str
    client_id: str
    deployment_ids: tuple[str, ...]
    auth_login_url: str  # the platform's OIDC authorization endpoint (where the login redirects)
    auth_token_url: str  # OAuth 2 token endpoint (client-credentials grant)
    jwks_url: str  # the platform's public keys
    token_audience: str = ""  # the client assertion's aud; the token URL when empty (Moodle, Canvas)
    # made by a dynamic registration: its URLs are the platform's word, not an admin's, so the tool
    # connects to them only at addresses lti.toml allows (network.py), as during the registration
    registered: bool = False

    @property
    def assertion_audience(self) -> str:
        return self.token_audience or self.auth_token_url


@dataclass(frozen=True)
class LtiConfig:
    base_url: str  # this tool's public URL, e.g. https://grader.example.edu
    platforms: tuple[Platform, ...] = ()
    passback_base_delay_s: float = 5.0  # retry after 5, 10, 20 ... s
    passback_max_delay_s: float = 3600.0
    # loopback, link-local and private networks a dynamic registration may reach (none by default)
    allow_private_networks: tuple[Network, ...] = ()

    @property
    def launch_url(self) -> str:
        return f"{self.base_url.rstrip('/')}/lti/launch"

    def platform(self, issuer: str, client_id: str | None = None) -> Platform | None:
        for p in self.platforms:
            if p.issuer == issuer and (client_id is None or p.client_id == client_id):
                return p
        return None


def config_path(data_dir: Path) -> Path:
    return Path(os.environ.get("GRADER_LTI_CONFIG", "") or data_dir / "lti.toml")


def load_config(path: Path) -> LtiConfig | None:
    """The registrations in ``path``; None when the file does not exist (LTI is off)."""
    if not path.is_file():
        return None
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
        tool = raw.get("tool", {})
        platforms = tuple(Platform(issuer=p["issuer"], client_id=str(p["client_id"]),
                                   deployment_ids=tuple(str(d) for d in p["deployment_ids"]),
                                   auth_login_url=p["auth_login_url"], auth_token_url=p["auth_token_url"],
                                   jwks_url=p["jwks_url"], token_audience=p.get("token_audience", ""))
                          for p in raw.get("platform", []))
        return LtiConfig(base_url=tool["base_url"], platforms=platforms,
                         passback_base_delay_s=float(tool.get("passback_base_delay_s", 5.0)),
                         passback_max_delay_s=float(tool.get("passback_max_delay_s", 3600.0)),
                         allow_private_networks=networks(tool.get("allow_private_networks", [])))
    except (tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as e:
        raise GraderError(f"{path}: not a usable LTI configuration ({type(e).__name__}: {e}); see docs/LTI.md for "
                          "the fields of [tool] and each [[platform]]") from None
