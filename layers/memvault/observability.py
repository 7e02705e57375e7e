"""Shared observability: one logger and one metrics namespace for every handler.

Rule: log ids and counts, never memory content, tokens or secrets. Helpers below
take only identifiers so that a call site cannot pass content by accident.
"""

from __future__ import annotations

from aws_lambda_powertools import Logger, Metrics

SERVICE = "memvault"

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="memvault", service=SERVICE)
