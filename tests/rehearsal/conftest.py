"""The deploy rehearsal's fixtures: a silo and a pool stack, each synthesized as an
operator would (``--context`` naming the token issuer's JWKS, served here on loopback),
stood up on moto and run from its built assets."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infrastructure.conftest import synth
from tests.rehearsal.gateway import Gateway
from tests.rehearsal.world import World, rehearse
from tests.support.issuer import Issuer, serve_jwks
from tests.support.opensearch import opensearch_url

TENANTS = ("acme", "globex")


def issuer_of(tenant: str) -> str:
    return f"https://issuer.test/{tenant}"


@pytest.fixture(scope="session")
def issuer() -> Issuer:
    return Issuer()


@pytest.fixture(scope="session")
def jwks(issuer: Issuer) -> Iterator[str]:
    with serve_jwks(issuer) as url:
        yield url


def _synth(tmp: Path, mode: str, jwks: str) -> Path:
    if mode == "silo":
        context = {"tenant": "acme", "issuer": issuer_of("acme"), "jwks_url": jwks}
    else:
        tenants = tmp / "tenants.json"
        tenants.write_text(
            json.dumps(
                [{"tenant_id": t, "issuer": issuer_of(t), "jwks_url": jwks} for t in TENANTS]
            )
        )
        context = {"mode": "pool", "tenants_file": str(tenants)}
    out = tmp / "cdk.out"
    synth(out, **context)
    return out


@pytest.fixture(scope="module", params=["silo", "pool"])
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, jwks: str
) -> Iterator[World]:
    mode = str(request.param)
    tmp = tmp_path_factory.mktemp(f"rehearsal-{mode}")
    outdir = _synth(tmp, mode, jwks)
    with rehearse(outdir, mode, opensearch_url(), tmp / "run") as made:
        yield made


@pytest.fixture(scope="module")
def gateway(world: World) -> Gateway:
    return Gateway(world.template, world.runtime.by_function_name)
