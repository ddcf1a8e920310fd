"""Values from requests and platforms, checked before the tool uses them, and shown short."""

from __future__ import annotations

import re
from urllib.parse import urlparse

HOST = re.compile(r"([A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*|\[[0-9A-Fa-f:.]+\])(:[0-9]{1,5})?")
MAX_URL = 2048


def web_url(url: object) -> bool:
    """An http(s) URL whose site is a plain host[:port] (no user info, nothing that could end a
    header value it is put into, as the deep-linking answer's CSP) and without spaces."""
    if not isinstance(url, str) or len(url) > MAX_URL:
        return False
    where = urlparse(url)
    return (where.scheme in ("https", "http") and HOST.fullmatch(where.netloc) is not None
            and not any(c.isspace() or ord(c) < 32 for c in url))


def shown(value: object, limit: int = 100) -> str:
    """``repr(value)`` cut to ``limit`` characters: a value from a request or a platform, in a
    message shown to the user and kept in the event log."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"
