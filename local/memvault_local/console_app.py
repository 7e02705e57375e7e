"""The web console at ``/console``: static files (``console/``), and in local mode a
dev-token endpoint that signs the page in.

The page itself only calls the public ``/v1`` API with the user's bearer token, so the same
files can be hosted anywhere that serves static files (see docs/console.md). What this module
adds is local mode's alone, and it lives in ``memvault_local``, which the Lambda layer
never ships:

- ``GET /console/`` and its files, with a Content-Security-Policy that allows scripts and
  styles from this origin only (no inline script, no ``eval``), no framing, no referrer;
- ``GET /console/config.json``: whether the dev sign-in is offered;
- ``POST /console/dev-token``: a token minted with the local stack's dev signing key, as
  ``memvault dev-token`` mints it. Served only when the stack listens on loopback, only to
  loopback clients that name a loopback ``Host`` (no DNS rebinding), only for a JSON body
  (so a cross-site form cannot send it) carrying the sign-in key the stack printed at
  start (so another user of the machine, who cannot read the banner or the key file,
  cannot mint one either).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import re
from collections.abc import Iterable
from importlib import resources
from typing import Any

from werkzeug.wrappers import Request, Response

from memvault.models.access import Scope
from memvault.observability import logger
from memvault_local.bodies import BodyTooLarge, read_bounded
from memvault_local.devkeys import DevKey

#: The page's files, shipped inside the package (``memvault_local/console/``).
FILES = {
    "index.html": "text/html; charset=utf-8",
    "console.js": "text/javascript; charset=utf-8",
    "console.css": "text/css; charset=utf-8",
}

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
}

#: Matched whole (``fullmatch``: ``$`` alone lets a trailing line break through).
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+-]*")
_SENSITIVITIES = ("public", "internal", "pii")
TOKEN_TTL = 3600
MAX_BODY = 4096


def _json(status: int, body: Any) -> Response:
    return Response(
        json.dumps(body), status=status, mimetype="application/json", headers=SECURITY_HEADERS
    )


def _error(status: int, code: str, message: str, details: Any = None) -> Response:
    return _json(status, {"error": {"code": code, "message": message, "details": details or {}}})


def _loopback(host: str | None) -> bool:
    if not host:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: A ``Host`` header as RFC 9110 allows it: a name, an IPv4 address or a bracketed IPv6
#: address, and an optional port. Anything else (``localhost:80@evil.example``) names no host.
_HOST = re.compile(r"(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<name>[A-Za-z0-9.\-]+))(?::\d{1,5})?")


def _host_name(header: str) -> str:
    """The name in a ``Host`` header, without its port (``[::1]:8787`` → ``::1``); ``""``
    for a header that is not a well-formed host."""
    found = _HOST.fullmatch(header)
    if found is None:
        return ""
    return found.group("v6") or found.group("name")


def read_file(name: str) -> bytes:
    return resources.files("memvault_local").joinpath("console", name).read_bytes()


class ConsoleApp:
    """Mounted at ``/console`` by the local stack (``DispatcherMiddleware``)."""

    def __init__(self, dev_key: DevKey | None = None, sign_in_key: str | None = None) -> None:
        #: Both or neither: the dev sign-in needs the key to mint with and the one to check.
        self.dev_key = dev_key if sign_in_key else None
        self.sign_in_key = sign_in_key if dev_key else None

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        response = self.dispatch(Request(environ))
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        if request.environ.get("PATH_INFO", "") == "":
            # /console → /console/, so the page's relative URLs resolve under it.
            location = f"{request.script_root}/"
            return Response(status=308, headers={"Location": location, **SECURITY_HEADERS})
        path = "/index.html" if request.path == "/" else request.path
        name = path.lstrip("/")
        if name == "dev-token":
            if request.method != "POST":
                return _error(405, "method_not_allowed", "the dev token is minted by POST")
            return self.dev_token(request)
        if request.method not in ("GET", "HEAD"):
            return _error(405, "method_not_allowed", "the console's files take GET")
        if name == "config.json":
            return _json(200, {"dev_sign_in": self.dev_key is not None})
        if name not in FILES:
            return _error(404, "not_found", "no such console file")
        headers = {"Content-Type": FILES[name], **SECURITY_HEADERS}
        return Response(read_file(name), status=200, headers=headers)

    def dev_token(self, request: Request) -> Response:
        if self.dev_key is None or self.sign_in_key is None:
            return _error(404, "not_found", "the dev sign-in is offered by the local stack only")
        if not _loopback(request.remote_addr) or not _loopback(
            _host_name(request.headers.get("Host", ""))
        ):
            return _error(403, "forbidden", "the dev sign-in answers loopback requests only")
        if request.mimetype != "application/json":
            return _error(415, "unsupported_media_type", "send the sign-in as application/json")
        too_large = _error(413, "payload_too_large", f"the sign-in is at most {MAX_BODY} bytes")
        if (request.content_length or 0) > MAX_BODY:
            return too_large
        try:
            # Counted as it is read: a chunked body declares no length to check first.
            raw = read_bounded(request.stream, MAX_BODY)
        except BodyTooLarge:
            return too_large
        try:
            body = json.loads(raw.decode("utf-8", "replace"))
        except (ValueError, RecursionError):  # Python's parser recurses into nesting
            return _error(
                422,
                "validation_failed",
                "the body is not JSON, or nests too deeply",
                {"loc": ["body"]},
            )
        if not isinstance(body, dict):
            return _error(422, "validation_failed", "the body must be an object", {"loc": ["body"]})
        key = body.get("key")
        # surrogatepass: a lone surrogate (valid JSON, no UTF-8) is a wrong key, not an error.
        if not isinstance(key, str) or not hmac.compare_digest(
            key.encode("utf-8", "surrogatepass"), self.sign_in_key.encode()
        ):
            return _error(
                403,
                "forbidden",
                "the sign-in key is missing or wrong: open the console link that "
                "`memvault run` printed",
            )
        problems = _problems(body)
        if problems:
            return _error(
                422, "validation_failed", "the sign-in is not valid", {"errors": problems}
            )
        scope = " ".join(body["scopes"])
        token = self.dev_key.mint(
            tenant=body["tenant"],
            subject=body.get("subject") or None,
            scope=scope,
            max_sensitivity=body.get("max_sensitivity") or None,
            ttl=TOKEN_TTL,
        )
        logger.info(
            "console dev token minted",
            extra={"tenant_id": body["tenant"], "subject_id": body.get("subject")},
        )
        return _json(200, {"token": token, "expires_in": TOKEN_TTL})


def _problems(body: dict[str, Any]) -> list[dict[str, Any]]:
    """What is wrong with a dev sign-in's fields: the location and why, never the value."""
    problems: list[dict[str, Any]] = []
    allowed = {"key", "tenant", "subject", "scopes", "max_sensitivity"}
    for extra in sorted(set(body) - allowed):
        problems.append({"loc": ["body", extra], "msg": "unknown field"})
    tenant = body.get("tenant")
    if not isinstance(tenant, str) or not 1 <= len(tenant) <= 64 or not _NAME.fullmatch(tenant):
        problems.append({"loc": ["body", "tenant"], "msg": "a tenant id: letters, digits, _.:@+-"})
    subject = body.get("subject")
    if subject not in (None, "") and (
        not isinstance(subject, str) or len(subject) > 128 or not _NAME.fullmatch(subject)
    ):
        problems.append(
            {"loc": ["body", "subject"], "msg": "a subject id: letters, digits, _.:@+-"}
        )
    scopes = body.get("scopes")
    known = {s.value for s in Scope}
    if (
        not isinstance(scopes, list)
        or not scopes
        or not all(isinstance(s, str) and s in known for s in scopes)
    ):
        problems.append({"loc": ["body", "scopes"], "msg": f"one or more of {sorted(known)}"})
    sensitivity = body.get("max_sensitivity")
    if sensitivity not in (None, "") and sensitivity not in _SENSITIVITIES:
        problems.append({"loc": ["body", "max_sensitivity"], "msg": "public, internal or pii"})
    return problems
