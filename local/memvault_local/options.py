"""What ``memvault run`` is told by its own variables, read once at start (the runtime's
settings are ``memvault.config.Settings``; these are the local stack's alone, listed
under "Variables outside Settings" in docs/configuration.md)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class StackOptions(BaseSettings):
    """``MEMVAULT_<FIELD>`` for each field; ``--host`` and ``--port`` override theirs."""

    model_config = SettingsConfigDict(env_prefix="MEMVAULT_", extra="ignore", frozen=True)

    host: str = Field(default="127.0.0.1", min_length=1)
    #: 0: any free port.
    port: int = Field(default=8787, ge=0, le=65535)
    #: ``aws``: the tables a CDK deployment made in a real account.
    backend: Literal["aws"] | None = None
    #: Another DynamoDB (DynamoDB Local) instead of the embedded store.
    dynamodb_endpoint: str | None = Field(default=None, min_length=1)
    #: ``off``: embed in the API's process instead of worker processes.
    embed_worker: Literal["on", "off"] = "on"
    #: How often the sweeper plays DynamoDB TTL, in seconds.
    sweep_seconds: float = Field(default=15.0, gt=0, allow_inf_nan=False)
    #: Seconds after which the server closes a connection that sends nothing.
    read_idle_seconds: float = Field(default=20.0, gt=0, allow_inf_nan=False)
    #: The ``memvault`` logger's level.
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING"
    #: Print tokens and the console's sign-in key even when the output is not a terminal.
    show_credentials: bool = False

    @property
    def on_dynamodb(self) -> bool:
        return self.backend == "aws" or self.dynamodb_endpoint is not None
