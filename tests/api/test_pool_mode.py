"""Pool mode at run time: each tenant's tokens are verified against that tenant's own
issuer, the authorizer names the tenant's usage plan, and data access goes through a
session scoped to the caller's tenant (assumed with the tenant as session tag).

moto's STS issues the session but does not evaluate IAM; that the tagged session can
reach only its own items is checked on the policies offline (tests/infrastructure)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from memvault.config import Settings, TenantIssuer
from memvault.identity.authorizer import authorize
from memvault.identity.tokens import StaticKeys, TenantIssuers, TokenVerifier
from memvault.storage.dynamodb.tables import create_tables
from memvault.tenancy import TenantScopedServices
from memvault_wire.errors import Unauthorized
from tests.support.api import load_event
from tests.support.harness import FakeClock, a_write, ctx
from tests.support.issuer import AUDIENCE, Issuer


class TwoIssuers(TenantIssuers):
    """TenantIssuers with each tenant's keys given directly instead of fetched."""

    def __init__(self, issuers: dict[str, tuple[str, Issuer]]) -> None:
        self._verifiers = {
            tenant: TokenVerifier(StaticKeys(key.jwks()), issuer=iss, audience=AUDIENCE, leeway=60)
            for tenant, (iss, key) in issuers.items()
        }


@pytest.fixture(scope="module")
def keys() -> dict[str, Issuer]:
    return {"acme": Issuer("acme-key"), "globex": Issuer("globex-key")}


def test_each_tenants_tokens_verify_only_against_its_own_issuer(keys: dict[str, Issuer]) -> None:
    verifier = TwoIssuers(
        {"acme": ("https://acme", keys["acme"]), "globex": ("https://globex", keys["globex"])}
    )
    assert verifier.verify(keys["acme"].token(iss="https://acme")).tenant_id == "acme"
    assert (
        verifier.verify(keys["globex"].token(iss="https://globex", tenant_id="globex")).tenant_id
        == "globex"
    )
    # acme's issuer minting a token that claims to be globex's is refused.
    with pytest.raises(Unauthorized):
        verifier.verify(keys["acme"].token(iss="https://globex", tenant_id="globex"))
    with pytest.raises(Unauthorized):
        verifier.verify(keys["acme"].token(iss="https://acme", tenant_id="initech"))


def test_the_authorizer_names_the_callers_usage_plan(keys: dict[str, Issuer]) -> None:
    verifier = TwoIssuers({"acme": ("https://acme", keys["acme"])})
    event = load_event("authorizer_token.json")
    event["authorizationToken"] = f"Bearer {keys['acme'].token(iss='https://acme')}"
    policy = authorize(event, verifier, {"acme": "key-of-acme", "globex": "key-of-globex"})
    assert policy["usageIdentifierKey"] == "key-of-acme"


def test_settings_read_the_tenant_issuers_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "MEMVAULT_TENANT_ISSUERS", '{"acme": {"issuer": "https://a", "jwks_url": "https://a/jwks"}}'
    )
    assert Settings().tenant_issuers == {
        "acme": TenantIssuer(issuer="https://a", jwks_url="https://a/jwks")
    }


def test_data_access_uses_a_session_tagged_with_the_callers_tenant(aws: None) -> None:
    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="tenant-access", AssumeRolePolicyDocument="{}")["Role"]
    settings = Settings(table_prefix="pool-", tenant_role_arn=role["Arn"])
    create_tables(boto3.client("dynamodb", region_name="us-east-1"), "pool-")
    sts = boto3.client("sts", region_name="us-east-1")
    calls: list[dict[str, Any]] = []
    real = sts.assume_role

    def recorded(**kwargs: Any) -> Any:
        calls.append(kwargs)
        return real(**kwargs)

    sts.assume_role = recorded
    scoped = TenantScopedServices(settings, sts=sts, clock=FakeClock())

    acme = scoped.for_tenant("acme")
    assert scoped.for_tenant("acme") is acme  # cached while the session is fresh
    globex = scoped.for_tenant("globex")
    assert globex is not acme
    assert [c["Tags"] for c in calls] == [
        [{"Key": "tenant_id", "Value": "acme"}],
        [{"Key": "tenant_id", "Value": "globex"}],
    ]
    written = acme.memory.write(ctx("acme"), "u-1", a_write()).memory
    assert acme.memory.get(ctx("acme"), "u-1", written.memory_id) == written


def test_in_pool_mode_requests_use_the_tenant_session_even_after_a_health_check(
    aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Health runs on the function's own credentials; data requests never may."""
    from aws_lambda_powertools.utilities.data_classes import APIGatewayProxyEvent

    from memvault.api.deps import Dependencies
    from memvault.api.events import proxy_event
    from memvault.config import get_settings
    from tests.support.api import claims

    iam = boto3.client("iam", region_name="us-east-1")
    role = iam.create_role(RoleName="tenant-access", AssumeRolePolicyDocument="{}")["Role"]
    monkeypatch.setenv("MEMVAULT_TENANT_ROLE_ARN", role["Arn"])
    get_settings.cache_clear()
    try:
        from memvault.handlers.api import _build, _scoped

        deps = Dependencies(_build, _scoped)
        own = deps.services()  # what a health check builds
        event = APIGatewayProxyEvent(proxy_event("GET", "/v1/x", claims=claims("acme")))
        scoped = deps.services_for(event)
        assert scoped is not own
        assert deps.services_for(event) is scoped
    finally:
        get_settings.cache_clear()
