"""Identity: RS256 tokens verified against the issuer's JWKS (fetched over HTTP, cached),
clock skew bounded; the authorizer passes verified claims on and nothing else."""

from __future__ import annotations

from collections.abc import Iterator

import jwt
import pytest

from memvault.config import Settings
from memvault.identity.authorizer import AuthorizerHandler, authorize
from memvault.identity.tokens import TokenVerifier
from memvault.models.access import Scope
from memvault_wire.errors import Unauthorized
from tests.support.api import invoke, load_event, memory_body
from tests.support.issuer import AUDIENCE, ISSUER, Issuer, serve_jwks


@pytest.fixture(scope="module")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture
def verifier(issuer: Issuer) -> Iterator[TokenVerifier]:
    with serve_jwks(issuer) as url:
        yield TokenVerifier.from_settings(
            Settings(jwks_url=url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_leeway_seconds=60)
        )


def test_a_valid_token_becomes_an_access_context(verifier: TokenVerifier, issuer: Issuer) -> None:
    token = issuer.token(
        agent_role="writer", max_sensitivity="pii", scope="memory:read subjects:any unknown:scope"
    )
    ctx = verifier.verify(token).access_context()
    assert (ctx.tenant_id, ctx.subject_id, ctx.principal) == ("acme", "u-1", "agent-client-1")
    assert ctx.scopes == frozenset({Scope.MEMORY_READ, Scope.SUBJECTS_ANY})
    assert (ctx.agent_role, ctx.max_sensitivity.value) == ("writer", "pii")


def test_signing_keys_are_fetched_once_and_cached(verifier: TokenVerifier, issuer: Issuer) -> None:
    before = issuer.fetches
    for _ in range(5):
        verifier.verify(issuer.token())
    assert issuer.fetches - before == 1


def test_clock_skew_is_tolerated_only_within_the_leeway(
    verifier: TokenVerifier, issuer: Issuer
) -> None:
    verifier.verify(issuer.token(lifetime=600, issued_ago=630))  # expired 30 s ago
    with pytest.raises(Unauthorized, match="expired"):
        verifier.verify(issuer.token(lifetime=600, issued_ago=700))  # 100 s ago


class _Clock:
    def __init__(self) -> None:
        import time

        self.t = time.time()

    def __call__(self) -> float:
        return self.t


def _counting_decode(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = jwt.decode

    def decode(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(jwt, "decode", decode)
    return calls


def test_a_token_once_verified_is_not_checked_again_within_its_life(
    verifier: TokenVerifier, issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_decode(monkeypatch)
    token = issuer.token()
    claims = [verifier.verify(token) for _ in range(5)]
    assert len(calls) == 1
    assert all(c == claims[0] for c in claims)


def test_a_cached_token_is_refused_once_it_expires(
    issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache keeps an entry no longer than the token's own exp (plus the leeway the
    signature check allowed); past that the token goes through the full check again, which
    refuses it as expired (covered by the leeway test above on the real clock)."""
    from memvault.identity.tokens import VerifiedTokens

    clock = _Clock()
    calls = _counting_decode(monkeypatch)
    with serve_jwks(issuer) as url:
        plain = TokenVerifier.from_settings(
            Settings(jwks_url=url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_leeway_seconds=60)
        )
        cached = TokenVerifier(
            plain.keys,
            issuer=ISSUER,
            audience=AUDIENCE,
            leeway=60,
            verified=VerifiedTokens(ttl=10_000, now=clock),
        )
        token = issuer.token(lifetime=120)
        cached.verify(token)
        clock.t += 170  # 50 s past exp: inside the leeway, still answered from the cache
        cached.verify(token)
        assert len(calls) == 1
        clock.t += 20  # 70 s past exp: beyond it, so the full check runs again
        cached.verify(token)
        assert len(calls) == 2


def test_the_cache_keeps_an_entry_at_most_its_ttl_and_is_bounded(
    verifier: TokenVerifier, issuer: Issuer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memvault.identity.tokens import VerifiedTokens

    clock = _Clock()
    verifier.verified = VerifiedTokens(size=2, ttl=30, now=clock)
    calls = _counting_decode(monkeypatch)
    token = issuer.token()
    verifier.verify(token)
    clock.t += 31
    verifier.verify(token)  # the ttl passed: checked again
    assert len(calls) == 2
    others = [issuer.token(sub=f"agent-{i}") for i in range(2)]
    for other in others:
        verifier.verify(other)
    verifier.verify(token)  # evicted by the two newer tokens: checked again
    assert len(calls) == 5


def test_a_tampered_copy_of_a_verified_token_is_still_refused(
    verifier: TokenVerifier, issuer: Issuer
) -> None:
    token = issuer.token()
    verifier.verify(token)
    header, _, signature = token.split(".")
    forged = jwt.encode(
        {**jwt.decode(token, options={"verify_signature": False}), "tenant_id": "other"},
        "a-key-that-is-not-the-issuers-own-signing-key",
        algorithm="HS256",
    ).split(".")[1]
    with pytest.raises(Unauthorized):
        verifier.verify(f"{header}.{forged}.{signature}")


def test_leeway_cannot_be_configured_beyond_five_minutes() -> None:
    with pytest.raises(ValueError, match="jwt_leeway_seconds"):
        Settings(jwt_leeway_seconds=3600)


BAD = {
    "signed by another key": lambda i: Issuer(kid=i.kid).token(),
    "unknown key id": lambda i: Issuer(kid="other").token(),
    "wrong audience": lambda i: i.token(aud="someone-else"),
    "wrong issuer": lambda i: i.token(iss="https://evil.test"),
    "no expiry": lambda i: i.token(drop=("exp",)),
    "no tenant": lambda i: i.token(drop=("tenant_id",)),
    "malformed tenant": lambda i: i.token(tenant_id="a#b"),
    "secret clearance": lambda i: i.token(max_sensitivity="secret"),
    # A fresh probe: a blank role was read as a person's token (user_confirmed, confirm).
    "blank agent role": lambda i: i.token(agent_role=""),
    "whitespace agent role": lambda i: i.token(agent_role="  "),
    "HS256 with the public key": lambda i: jwt.encode(
        {"sub": "x", "tenant_id": "acme"}, "shared-secret-of-32-bytes-or-more!!", algorithm="HS256"
    ),
    "unsigned": lambda i: jwt.encode({"sub": "x", "tenant_id": "acme"}, None, algorithm="none"),
    "garbage": lambda i: "not.a.jwt",
}


@pytest.mark.parametrize("make", BAD.values(), ids=BAD.keys())
def test_bad_tokens_are_unauthorized(verifier: TokenVerifier, issuer: Issuer, make: object) -> None:
    token = make(issuer)  # type: ignore[operator]
    with pytest.raises(Unauthorized):
        verifier.verify(token)


SAYS = {
    "garbage": "it is not a signed JWT",
    "signed by another key": "its signature does not match",
    "wrong audience": "its audience (aud) is not this service's",
    "wrong issuer": "its issuer (iss) is not the one this service trusts",
    "no expiry": "it has no 'exp' claim",
}


@pytest.mark.parametrize("name", SAYS)
def test_a_bad_token_is_told_what_is_wrong_with_it(
    verifier: TokenVerifier, issuer: Issuer, name: str
) -> None:
    """A fresh probe: a malformed token was answered 'the token is not valid: DecodeError',
    a library's class name rather than what to fix."""
    with pytest.raises(Unauthorized) as raised:
        verifier.verify(BAD[name](issuer))  # type: ignore[operator]
    assert SAYS[name] in raised.value.message
    assert "Error" not in raised.value.message


def test_the_authorizer_allows_with_the_verified_claims_as_context(
    verifier: TokenVerifier, issuer: Issuer
) -> None:
    event = load_event("authorizer_token.json")
    event["authorizationToken"] = f"Bearer {issuer.token(agent_role='writer')}"
    policy = authorize(event, verifier)
    assert policy["principalId"] == "agent-client-1"
    assert policy["context"]["tenant_id"] == "acme"
    assert policy["context"]["scope"] == "memory:read memory:write memory:delete"
    statement = policy["policyDocument"]["Statement"][0]
    assert statement["Effect"] == "Allow"
    assert statement["Resource"] == ["arn:aws:execute-api:eu-west-1:123456789012:abc123/prod/*/*"]


@pytest.mark.parametrize("header", ["", "Basic abc", "Bearer ", "Bearer not.a.jwt"])
def test_the_authorizer_answers_unauthorized_for_a_bad_header(
    verifier: TokenVerifier, header: str
) -> None:
    handler = AuthorizerHandler(lambda: verifier)
    event = {**load_event("authorizer_token.json"), "authorizationToken": header}
    with pytest.raises(Exception, match=r"^Unauthorized$"):
        handler(event, None)


@pytest.mark.usefixtures("api")
def test_the_authorizers_context_is_what_the_handler_trusts(
    verifier: TokenVerifier, issuer: Issuer
) -> None:
    """Token → authorizer → API Gateway event → handler, with nothing of ours mocked."""
    event = load_event("authorizer_token.json")
    event["authorizationToken"] = f"Bearer {issuer.token(subject_id='u-42')}"
    policy = authorize(event, verifier)
    request = load_event("api_write_memory.json")
    request["requestContext"]["authorizer"] = {
        "principalId": policy["principalId"],
        "integrationLatency": 12,
        **policy["context"],
    }
    import json

    request["body"] = json.dumps(memory_body())
    answer = invoke(request)
    assert answer.status == 201
    assert answer.body["subject_id"] == "u-42"


def test_a_token_that_lives_longer_than_the_cap_is_refused(issuer: Issuer) -> None:
    """A token minted to live until the year 9999 was accepted: a standing credential.
    The cap (24 h by default, ``MEMVAULT_JWT_MAX_LIFETIME_SECONDS``) is on exp - iat."""
    with serve_jwks(issuer) as url:
        settings = Settings(
            jwks_url=url, jwt_issuer=ISSUER, jwt_audience=AUDIENCE, jwt_leeway_seconds=60
        )
        verifier = TokenVerifier.from_settings(settings)
        with pytest.raises(Unauthorized, match="lives longer") as raised:
            verifier.verify(issuer.token(lifetime=253402300799 - 2_000_000_000))
        assert raised.value.details == {"max_lifetime_seconds": 86_400}
        with pytest.raises(Unauthorized, match="lives longer"):
            verifier.verify(issuer.token(lifetime=86_401))
        verifier.verify(issuer.token(lifetime=86_400))
        longer = TokenVerifier.from_settings(
            settings.model_copy(update={"jwt_max_lifetime_seconds": 7 * 86_400})
        )
        longer.verify(issuer.token(lifetime=86_401))
