"""One stack per deployment; it only composes constructs."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack

from constructs import Construct
from infra.constructs.data import DataTables


class MemvaultStack(Stack):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        table_prefix: str = "memvault-",
        production: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.data = DataTables(self, "Data", table_prefix=table_prefix, production=production)
