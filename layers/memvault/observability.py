"""Shared observability: one logger, tracer and metrics namespace for every handler.

Rule: log ids and counts, never memory content, tokens or secrets. Helpers below
take only identifiers so that a call site cannot pass content by accident.
"""

from __future__ import annotations

import warnings

from aws_lambda_powertools import Logger, Metrics, Tracer

SERVICE = "memvault"

logger = Logger(service=SERVICE)
# Tracer switches itself off outside Lambda (tests, local mode).
tracer = Tracer(service=SERVICE)
metrics = Metrics(namespace="memvault", service=SERVICE)
# Read-only requests publish no metric; that is normal, not worth a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish")
