"""A tiny urllib client that returns raw answers (status, JSON body, headers), for the
end-to-end tests, the benchmarks and ``RunningStack.client``. The CLI and applications
use the SDK, ``memvault_client``."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ApiResponse:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class ApiClient:
    def __init__(self, endpoint: str, token: str | None, timeout: float = 30.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.token = token
        self.timeout = timeout

    def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: dict[str, Any] | None = None,
    ) -> ApiResponse:
        url = self.endpoint + path
        params = {k: v for k, v in (query or {}).items() if v is not None}
        if params:
            url += "?" + urllib.parse.urlencode(params)
        if not url.startswith(("http://", "https://")):
            raise ValueError("the endpoint must be an http(s) URL")
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        request = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as raw:  # noqa: S310
                return ApiResponse(raw.status, _json(raw.read()), dict(raw.headers.items()))
        except urllib.error.HTTPError as err:
            return ApiResponse(err.code, _json(err.read()), dict(err.headers.items()))


def _json(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return {
            "error": {
                "code": "bad_response",
                "message": raw[:200].decode(errors="replace"),
                "details": {},
            }
        }
