"""CDK entry point: ``cdk synth`` (cdk.json runs ``python -m infra.app``)."""

from __future__ import annotations

import aws_cdk as cdk

from infra.stack import MemvaultStack


def build_app(app: cdk.App | None = None) -> cdk.App:
    app = app or cdk.App()
    production = app.node.try_get_context("production") in (True, "true")
    prefix = app.node.try_get_context("table_prefix") or "memvault-"
    MemvaultStack(app, "Memvault", table_prefix=prefix, production=production)
    return app


if __name__ == "__main__":
    build_app().synth()
