"""The HTTP transport (httpx): the API behind API Gateway, or the local stack."""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx

from memvault_client._transport import Answer, NoAnswer, Request
from memvault_client._version import __version__
from memvault_client.errors import ConnectionFailed, MemvaultError

USER_AGENT = f"memvault-python/{__version__}"


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The certificate store every client of this process verifies servers with, read once.

    httpx reads the CA bundle (``SSL_CERT_FILE``, ``SSL_CERT_DIR`` or certifi's) for each
    client it builds: 30 to 90 ms of CPU, more than a whole request to the local stack, paid
    again by every ``with MemvaultClient(...)``. The context is shared instead; it is read
    at the first client, so a change of those variables later in the process is not seen.
    """
    return httpx.create_ssl_context()


def _base_url(endpoint: str) -> str:
    if not endpoint.startswith(("http://", "https://")):
        raise ValueError("the endpoint must be an http(s) URL")
    return endpoint.rstrip("/")


def _headers(request: Request, token: str | None) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
    if request.body is not None:
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _answer(response: httpx.Response) -> Answer:
    body: Any = None
    if response.content:
        try:
            body = response.json()
        except ValueError:
            body = None  # not JSON: an error answer says so, a success answer is refused
    return Answer(response.status_code, {k.lower(): v for k, v in response.headers.items()}, body)


class HttpTransport:
    """Sends requests to ``endpoint`` with one pooled ``httpx.Client`` (pass your own to
    set proxies, certificates or event hooks; it is then yours to close)."""

    def __init__(
        self, endpoint: str, *, timeout: float = 30.0, client: httpx.Client | None = None
    ) -> None:
        self.endpoint = _base_url(endpoint)
        self._own = client is None
        self._http = client or httpx.Client(timeout=timeout, verify=tls_context())

    def send(self, request: Request, token: str | None) -> Answer:
        try:
            response = self._http.request(
                request.method,
                self.endpoint + request.path,
                params=dict(request.query) or None,
                json=request.body,
                headers=_headers(request, token),
            )
        except httpx.TransportError as err:
            raise NoAnswer(type(err).__name__) from None
        return _answer(response)

    def close(self) -> None:
        if self._own:
            self._http.close()


class AsyncHttpTransport:
    """:class:`HttpTransport` on ``httpx.AsyncClient``."""

    def __init__(
        self, endpoint: str, *, timeout: float = 30.0, client: httpx.AsyncClient | None = None
    ) -> None:
        self.endpoint = _base_url(endpoint)
        self._own = client is None
        self._http = client or httpx.AsyncClient(timeout=timeout, verify=tls_context())

    async def send(self, request: Request, token: str | None) -> Answer:
        try:
            response = await self._http.request(
                request.method,
                self.endpoint + request.path,
                params=dict(request.query) or None,
                json=request.body,
                headers=_headers(request, token),
            )
        except httpx.TransportError as err:
            raise NoAnswer(type(err).__name__) from None
        return _answer(response)

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()


# Presigned artifact URLs: plain HTTP to the object store, never with the bearer token.


def _checked(response: httpx.Response, code: str) -> httpx.Response:
    if not 200 <= response.status_code < 300:
        raise MemvaultError(
            f"the object store answered {response.status_code}",
            code=code,
            status=response.status_code,
        )
    return response


def put_object(url: str, data: bytes, headers: dict[str, str], timeout: float) -> None:
    try:
        _checked(
            httpx.put(url, content=data, headers=headers, timeout=timeout, verify=tls_context()),
            "upload_failed",
        )
    except httpx.TransportError as err:
        raise ConnectionFailed(f"the upload got no answer ({type(err).__name__})") from None


def get_object(url: str, timeout: float) -> bytes:
    try:
        return _checked(
            httpx.get(url, timeout=timeout, verify=tls_context()), "download_failed"
        ).content
    except httpx.TransportError as err:
        raise ConnectionFailed(f"the download got no answer ({type(err).__name__})") from None


async def aput_object(url: str, data: bytes, headers: dict[str, str], timeout: float) -> None:
    try:
        async with httpx.AsyncClient(timeout=timeout, verify=tls_context()) as http:
            _checked(await http.put(url, content=data, headers=headers), "upload_failed")
    except httpx.TransportError as err:
        raise ConnectionFailed(f"the upload got no answer ({type(err).__name__})") from None


async def aget_object(url: str, timeout: float) -> bytes:
    try:
        async with httpx.AsyncClient(timeout=timeout, verify=tls_context()) as http:
            return _checked(await http.get(url), "download_failed").content
    except httpx.TransportError as err:
        raise ConnectionFailed(f"the download got no answer ({type(err).__name__})") from None
