"""The store backends every port's conformance suite and every both-stores test runs on:
the DynamoDB adapters (on moto) and the embedded SQLite store. A new backend is added here
and each of those suites picks it up."""

from __future__ import annotations

#: Store backends, by the name ``make_services(store=...)`` and the fixtures take.
STORES: tuple[str, ...] = ("dynamodb", "sqlite")
