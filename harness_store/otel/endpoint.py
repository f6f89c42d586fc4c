"""Where an export sends its spans: the receiver's OTLP/HTTP traces URL from the endpoint a user
gives, and a URL as messages show it (never its user and password)."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from ..errors import InvalidValueError

TRACES_PATH = "/v1/traces"


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL for `endpoint`: a base URL (`http://host:4318`) gets
    `/v1/traces`; a URL that already names a path is used as it is."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidValueError(f"{shown_url(endpoint)} is not an http:// or https:// URL")
    if parts.path in ("", "/"):
        parts = parts._replace(path=TRACES_PATH)
    return urlunsplit(parts)


def shown_url(url: str) -> str:
    """A URL as an error message shows it: without its user and password."""
    parts = urlsplit(url)
    if parts.hostname and (parts.username or parts.password):
        host = parts.hostname + (f":{parts.port}" if parts.port else "")
        parts = parts._replace(netloc=host)
    return urlunsplit(parts)
