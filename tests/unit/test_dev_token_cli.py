"""`memvault dev-token`: the token it prints is one the local stack accepts."""

from __future__ import annotations

from pathlib import Path

import pytest

from memvault_local.cli import main
from memvault_local.devkeys import DevKey
from memvault_wire.errors import Unauthorized


def test_a_dev_token_is_accepted_and_one_longer_than_a_day_is_not_minted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMVAULT_HOME", str(tmp_path))
    assert main(["dev-token", "--tenant", "t", "--subject", "s", "--ttl", "86400"]) == 0
    token = capsys.readouterr().out.strip()
    verifier = DevKey.load_or_create(tmp_path).verifier()
    assert verifier.verify(token).tenant_id == "t"

    assert main(["dev-token", "--tenant", "t", "--ttl", "31536000"]) == 2
    assert "--ttl must be between 60 and 86400" in capsys.readouterr().err
    # Minted past the CLI's check anyway, the stack still refuses it.
    forever = DevKey.load_or_create(tmp_path).mint(tenant="t", ttl=10 * 365 * 86_400)
    with pytest.raises(Unauthorized, match="lives longer"):
        verifier.verify(forever)
