"""The console's local-mode server (``memvault_local.console_app``) without a browser: the
files and their security headers, and who may mint a dev token from the page. The
dev-token endpoint exists in the local stack only: the Lambda handler has no such route."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jwt
import pytest
from werkzeug.test import Client, EnvironBuilder, TestResponse, run_wsgi_app

from memvault.api.events import LocalLambdaContext, proxy_event
from memvault.handlers.api import handler as lambda_handler
from memvault_local.console_app import CSP, FILES, ConsoleApp
from memvault_local.devkeys import DevKey

KEY = "s3cret-sign-in-key"


@pytest.fixture(scope="module")
def dev_key(tmp_path_factory: pytest.TempPathFactory) -> DevKey:
    return DevKey.load_or_create(Path(tmp_path_factory.mktemp("home")))


@pytest.fixture
def client(dev_key: DevKey) -> Client:
    return Client(ConsoleApp(dev_key, KEY))


def mint(client: Client, body: Any, **kwargs: Any) -> TestResponse:
    headers = kwargs.pop("headers", {"Host": "127.0.0.1:8787"})
    return client.post(
        "/dev-token",
        data=json.dumps(body) if not isinstance(body, str) else body,
        content_type=kwargs.pop("content_type", "application/json"),
        headers=headers,
        environ_base={"REMOTE_ADDR": kwargs.pop("remote_addr", "127.0.0.1")},
    )


def error(answer: TestResponse) -> tuple[int, str]:
    return answer.status_code, json.loads(answer.get_data())["error"]["code"]


GOOD = {"key": KEY, "tenant": "local", "subject": "user-1", "scopes": ["memory:read"]}


def test_every_file_is_served_with_the_policy_and_nothing_inline(client: Client) -> None:
    for name, media_type in FILES.items():
        answer = client.get(f"/{name}")
        assert answer.status_code == 200, name
        assert answer.headers["Content-Type"] == media_type
        assert answer.headers["Content-Security-Policy"] == CSP
        assert answer.headers["X-Content-Type-Options"] == "nosniff"
        assert answer.headers["Cache-Control"] == "no-store"
    assert client.get("/").get_data() == client.get("/index.html").get_data()
    assert "'unsafe-inline'" not in CSP and "script-src 'self'" in CSP
    redirect = client.get("")
    assert (redirect.status_code, redirect.headers["Location"]) == (308, "/")


def test_the_page_renders_stored_text_as_text_only() -> None:
    script = (Path(__file__).parents[2] / "local/memvault_local/console/console.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
        assert sink not in script, sink
    assert "localStorage" not in script and "document.cookie" not in script


def test_unknown_files_and_methods_are_the_api_s_errors(client: Client) -> None:
    assert error(client.get("/../pyproject.toml")) == (404, "not_found")
    assert error(client.get("/console_app.py")) == (404, "not_found")
    assert error(client.post("/index.html")) == (405, "method_not_allowed")
    assert error(client.get("/dev-token")) == (405, "method_not_allowed")


def test_config_says_whether_the_dev_sign_in_is_offered(dev_key: DevKey) -> None:
    offered = Client(ConsoleApp(dev_key, KEY)).get("/config.json")
    assert json.loads(offered.get_data()) == {"dev_sign_in": True}
    # Without a sign-in key (a stack not on loopback) there is no dev sign-in at all.
    bare = Client(ConsoleApp(dev_key, None))
    assert json.loads(bare.get("/config.json").get_data()) == {"dev_sign_in": False}
    assert error(mint(bare, GOOD)) == (404, "not_found")


def test_a_dev_token_is_minted_with_the_stack_s_key(client: Client, dev_key: DevKey) -> None:
    answer = mint(client, {**GOOD, "max_sensitivity": "pii"})
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "no-store"
    token = json.loads(answer.get_data())["token"]
    claims = dev_key.verifier().verify(token)
    assert (claims.tenant_id, claims.subject_id, claims.scope) == ("local", "user-1", "memory:read")
    assert claims.max_sensitivity.value == "pii"
    raw = jwt.decode(token, options={"verify_signature": False})
    assert raw["exp"] - raw["iat"] == 3600


@pytest.mark.parametrize(
    ("body", "kwargs", "refused"),
    [
        ({**GOOD, "key": "guess"}, {}, (403, "forbidden")),
        ({k: v for k, v in GOOD.items() if k != "key"}, {}, (403, "forbidden")),
        (GOOD, {"remote_addr": "10.0.0.7"}, (403, "forbidden")),
        # DNS rebinding: a page of another site resolved to 127.0.0.1 names its own host.
        (GOOD, {"headers": {"Host": "evil.example:8787"}}, (403, "forbidden")),
        # Probe 9 (F8): a malformed Host that begins with a loopback name names no host.
        (GOOD, {"headers": {"Host": "localhost:80@evil.example"}}, (403, "forbidden")),
        (GOOD, {"headers": {"Host": "127.0.0.1:8787 evil.example"}}, (403, "forbidden")),
        # A cross-site form can only send a simple content type.
        (
            GOOD,
            {"content_type": "application/x-www-form-urlencoded"},
            (415, "unsupported_media_type"),
        ),
        ("not json", {}, (422, "validation_failed")),
        ({**GOOD, "tenant": "a#b"}, {}, (422, "validation_failed")),
        ({**GOOD, "scopes": ["root"]}, {}, (422, "validation_failed")),
        ({**GOOD, "scopes": []}, {}, (422, "validation_failed")),
        ({**GOOD, "max_sensitivity": "secret"}, {}, (422, "validation_failed")),
        ({**GOOD, "ttl": 10**9}, {}, (422, "validation_failed")),
    ],
)
def test_a_dev_token_is_refused_clearly(
    client: Client, body: Any, kwargs: dict[str, Any], refused: tuple[int, str]
) -> None:
    answer = mint(client, body, **kwargs)
    assert error(answer) == refused
    assert "token" not in json.loads(answer.get_data())


def test_a_refusal_names_the_field_never_its_value(client: Client) -> None:
    answer = mint(client, {**GOOD, "subject": "bad subject <x>"})
    details = json.loads(answer.get_data())["error"]["details"]
    assert details == {"errors": [{"loc": ["body", "subject"], "msg": details["errors"][0]["msg"]}]}
    assert "bad subject" not in answer.get_data(as_text=True)


def test_the_lambda_handler_serves_no_console_and_mints_nothing() -> None:
    for method, path in (("POST", "/console/dev-token"), ("GET", "/console/")):
        event = proxy_event(method, path, claims=None, body=json.dumps(GOOD))
        out = lambda_handler(event, LocalLambdaContext())
        assert out["statusCode"] == 404, (method, path)
        assert "token" not in json.loads(out["body"])


def _raw(text: str) -> str:
    """A body as its JSON text, sent verbatim (``mint`` sends a str as it is)."""
    return text


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        # Python's JSON parser recurses: this used to end in a RecursionError, a 500 page.
        ('{"key": ' + "[" * 2000 + "]" * 2000 + "}", (422, "validation_failed")),
        ("[" * 1500 + "]" * 1500, (422, "validation_failed")),
        # A lone surrogate cannot be encoded to compare: it used to raise, a 500 page.
        ('{"key": "\\ud800", "tenant": "local", "scopes": ["memory:read"]}', (403, "forbidden")),
        (
            '{"key": "' + KEY + '", "tenant": "local\\ud800", "scopes": ["memory:read"]}',
            (422, "validation_failed"),
        ),
        # A trailing line break used to pass the name check (``$`` matches before it).
        (
            '{"key": "' + KEY + '", "tenant": "local\\n", "scopes": ["memory:read"]}',
            (422, "validation_failed"),
        ),
    ],
    ids=["nested key", "nested body", "surrogate key", "surrogate tenant", "newline tenant"],
)
def test_hostile_json_is_a_4xx_error_envelope_never_a_500(
    client: Client, body: str, refused: tuple[int, str]
) -> None:
    answer = mint(client, _raw(body))
    assert answer.headers["Content-Type"] == "application/json"
    assert error(answer) == refused


def test_a_chunked_sign_in_is_bounded_while_it_is_read(dev_key: DevKey) -> None:
    """No Content-Length to check first: the body is counted as it is read, and refused
    past the limit without the rest being kept."""
    read: list[int] = []

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            size = min(len(buffer), 4 * 1024 * 1024 - sum(read))  # 4 MB of blanks, then its end
            read.append(size)
            buffer[:size] = b" " * size
            return size

    environ = EnvironBuilder(
        "/dev-token",
        method="POST",
        content_type="application/json",
        headers={"Host": "127.0.0.1:8787", "Transfer-Encoding": "chunked"},
        environ_base={"REMOTE_ADDR": "127.0.0.1"},
    ).get_environ()
    # As werkzeug's server hands a chunked body over: no length, a terminated stream.
    environ.pop("CONTENT_LENGTH", None)
    environ["wsgi.input"] = io.BufferedReader(Endless())
    environ["wsgi.input_terminated"] = True
    body, status, headers = run_wsgi_app(ConsoleApp(dev_key, KEY), environ, buffered=True)
    answer = TestResponse(body, status, headers, request=None)  # type: ignore[arg-type]
    assert error(answer) == (413, "payload_too_large")
    assert sum(read) < 1024 * 1024
