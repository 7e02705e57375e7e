"""CDK entry point (cdk.json runs ``python -m infra.app``).

cdk synth --context tenant=acme                       # silo: one tenant's own account
cdk synth --context mode=pool --context tenants_file=infra/tenants.json
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from infra import deployment as deployment_config
from infra.nag import acknowledge
from infra.stack import MemvaultStack

ROOT = Path(__file__).resolve().parents[1]


def build_app(app: cdk.App | None = None) -> cdk.App:
    app = app or cdk.App()
    deployment = deployment_config.from_context(app.node.try_get_context, ROOT)
    stack = MemvaultStack(app, deployment.stack_name, deployment=deployment)
    acknowledge(stack)
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))
    return app


if __name__ == "__main__":
    build_app().synth()
