"""The MCP server's configuration: endpoint, token, subject, transport. No MCP SDK here,
so ``memvault --help`` and the parser work without the ``mcp`` extra.

The token is configured once for the server and never reaches a tool's arguments:
``--token-file`` (or ``MEMVAULT_TOKEN_FILE``), else ``MEMVAULT_TOKEN``. A token file is
read again for every request, so a token refreshed in place is picked up. There is no
``--token`` option: a command line is visible to every user of the machine.

The HTTP transport has a credential of its own, the secret every client sends as
``Authorization: Bearer``: ``--auth-token-file`` (or ``MEMVAULT_MCP_AUTH_TOKEN_FILE``), else
``MEMVAULT_MCP_AUTH_TOKEN``, else one the server makes at start (``memvault_client.mcp.server``).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_ENDPOINT = "http://127.0.0.1:8787"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8788
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
#: The HTTP transport's secret: printable ASCII without spaces (it rides in a header), and
#: long enough not to be guessed.
_AUTH_SECRET = re.compile(r"[\x21-\x7e]{16,}")


class ConfigError(Exception):
    """A configuration the server cannot start with: its message is for the user."""


TokenSource = str | Callable[[], str]


@dataclass(frozen=True)
class Settings:
    endpoint: str
    #: The bearer token, or a callable that reads it (a token file); never printed.
    token: TokenSource = field(repr=False)
    #: The subject every tool acts for; ``None``: the token names none, the tools take one.
    subject_id: str | None
    transport: str = "stdio"
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    #: The HTTP transport's bearer secret as configured; ``None``: made at start. Never printed
    #: when configured.
    auth_token: str | None = field(default=None, repr=False)


def data_home() -> Path:
    """The memvault data folder (``MEMVAULT_HOME``, default ``~/.memvault``), as the local
    stack's ``memvault_local.devkeys.data_home``."""
    return Path(os.environ.get("MEMVAULT_HOME") or Path.home() / ".memvault")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``memvault mcp`` (and ``python -m memvault_client.mcp``)."""
    env = os.environ
    parser.add_argument(
        "--transport",
        choices=["stdio", "http"],
        default="stdio",
        help="stdio (the default: an MCP host starts the server) or streamable HTTP",
    )
    parser.add_argument(
        "--host",
        default=DEFAULT_HOST,
        help=f"HTTP transport: the address to bind (default {DEFAULT_HOST}, this machine only)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=int(env.get("MEMVAULT_MCP_PORT", DEFAULT_PORT)),
        help=f"HTTP transport: the port (default $MEMVAULT_MCP_PORT or {DEFAULT_PORT})",
    )
    parser.add_argument(
        "--auth-token-file",
        default=env.get("MEMVAULT_MCP_AUTH_TOKEN_FILE"),
        help="HTTP transport: a file holding the secret every client must send as "
        "'Authorization: Bearer <secret>' (default $MEMVAULT_MCP_AUTH_TOKEN_FILE; else "
        "$MEMVAULT_MCP_AUTH_TOKEN; else a random one, printed at start to a terminal or "
        "written to a private file under $MEMVAULT_HOME)",
    )
    parser.add_argument(
        "--endpoint",
        default=env.get("MEMVAULT_ENDPOINT", DEFAULT_ENDPOINT),
        help=f"the memvault API (default $MEMVAULT_ENDPOINT or {DEFAULT_ENDPOINT})",
    )
    parser.add_argument(
        "--token-file",
        default=env.get("MEMVAULT_TOKEN_FILE"),
        help="a file holding the bearer token, read for every request (default "
        "$MEMVAULT_TOKEN_FILE; else the token is $MEMVAULT_TOKEN)",
    )
    parser.add_argument(
        "--subject",
        default=env.get("MEMVAULT_SUBJECT"),
        help="the subject the tools act for when the token names none (default "
        "$MEMVAULT_SUBJECT); a token bound to a subject fixes it",
    )


def _file_token(path: Path) -> Callable[[], str]:
    def read() -> str:
        from memvault_client import Unauthorized

        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise Unauthorized(f"the token file could not be read ({err.strerror})") from None
        if not token:
            raise Unauthorized("the token file is empty")
        return token

    return read


def token_claims(token: str) -> dict[str, Any]:
    """The token's claims, read without verifying it (the API verifies; this only learns
    which subject the token is bound to). Not a JWT: no claims."""
    import jwt

    try:
        claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return {}
    return claims


def load_settings(
    *,
    endpoint: str | None = None,
    token_file: str | None = None,
    subject: str | None = None,
    transport: str = "stdio",
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    auth_token_file: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    env = os.environ if environ is None else environ
    token: TokenSource
    if token_file:
        path = Path(token_file).expanduser()
        token = _file_token(path)
        try:
            first = token()
        except Exception as err:  # the SDK's Unauthorized: say it as configuration
            raise ConfigError(f"token file {path}: {getattr(err, 'message', err)}") from None
    elif env.get("MEMVAULT_TOKEN", "").strip():
        token = first = env["MEMVAULT_TOKEN"].strip()
    else:
        raise ConfigError(
            "no token: set MEMVAULT_TOKEN, or MEMVAULT_TOKEN_FILE / --token-file to a file "
            "holding one (against the local stack: memvault dev-token --tenant local "
            "--subject user-1 --scope '...')"
        )
    bound = token_claims(first).get("subject_id")
    if bound is not None and subject and subject != bound:
        raise ConfigError(
            f"the token acts for subject {bound!r} only; --subject / MEMVAULT_SUBJECT "
            f"names {subject!r}"
        )
    if port < 0 or port > 65_535:
        raise ConfigError(f"--port {port}: not a port")
    return Settings(
        endpoint=(endpoint or env.get("MEMVAULT_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/"),
        token=token,
        subject_id=bound if isinstance(bound, str) else (subject or None),
        transport=transport,
        host=host,
        port=port,
        auth_token=_auth_token(auth_token_file, env) if transport == "http" else None,
    )


def _auth_token(path_name: str | None, env: Mapping[str, str]) -> str | None:
    """The HTTP transport's secret from ``--auth-token-file`` or ``MEMVAULT_MCP_AUTH_TOKEN``;
    ``None`` when neither is set (the server makes one)."""
    if path_name:
        path = Path(path_name).expanduser()
        try:
            secret = path.read_text(encoding="utf-8").strip()
        except OSError as err:
            raise ConfigError(f"auth token file {path}: unreadable ({err.strerror})") from None
        where = f"auth token file {path}"
    else:
        secret = env.get("MEMVAULT_MCP_AUTH_TOKEN", "").strip()
        if not secret:
            return None
        where = "MEMVAULT_MCP_AUTH_TOKEN"
    if not _AUTH_SECRET.fullmatch(secret):
        raise ConfigError(
            f"{where}: the HTTP transport's secret must be at least 16 printable ASCII "
            "characters without spaces (e.g. python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')"
        )
    return secret


def settings_from_args(args: argparse.Namespace) -> Settings:
    return load_settings(
        endpoint=args.endpoint,
        token_file=args.token_file,
        subject=args.subject,
        transport=args.transport,
        host=args.host,
        port=args.port,
        auth_token_file=args.auth_token_file,
    )
