"""The Lambda functions and the runtime layer they share."""

from __future__ import annotations

import json

from aws_cdk import Stack
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs

from constructs import Construct
from infra import settings
from infra.deployment import Deployment
from infra.layer import function_code, runtime_layer_code


class Compute(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: Deployment,
        environment: dict[str, str],
    ) -> None:
        super().__init__(scope, construct_id)
        self.layer = lambda_.LayerVersion(
            self,
            "Runtime",
            code=runtime_layer_code(),
            compatible_runtimes=[settings.PYTHON_RUNTIME],
            compatible_architectures=[settings.ARCHITECTURE],
            description="memvault runtime package and its dependencies",
        )
        issuers = {
            t.tenant_id: {"issuer": t.issuer, "jwks_url": str(t.jwks_url), "audience": t.audience}
            for t in deployment.tenants
        }
        policies = {
            t.tenant_id: {
                k: v
                for k, v in {
                    "session_idle_seconds": t.session_idle_seconds,
                    "session_max_seconds": t.session_max_seconds,
                }.items()
                if v is not None
            }
            for t in deployment.tenants
        }
        common = {
            "POWERTOOLS_SERVICE_NAME": settings.APP,
            "POWERTOOLS_METRICS_NAMESPACE": settings.APP,
            "MEMVAULT_TABLE_PREFIX": deployment.table_prefix,
            # The runtime's own clients (DynamoDB, S3, STS, SigV4 for OpenSearch) use this.
            "MEMVAULT_AWS_REGION": Stack.of(self).region,
        }
        if deployment.silo_tenant:
            common["MEMVAULT_SILO_TENANT_ID"] = deployment.silo_tenant
        base = {
            **common,
            "MEMVAULT_TENANT_ISSUERS": json.dumps(issuers, sort_keys=True),
            "MEMVAULT_TENANT_POLICIES": json.dumps(
                {k: v for k, v in policies.items() if v}, sort_keys=True
            ),
            **environment,
        }
        self.reserved: dict[str, int] = dict(deployment.reserved_concurrency)
        self.functions = {
            name: self._function(name, base) for name in ("api", "authorizer", "direct", "sweeper")
        }
        # The memory table's stream consumer (its event source, search settings and
        # grants are added by the Search construct). It serves no caller, so it is told
        # nothing of issuers, tenants' policies or artifacts.
        self.functions["indexer"] = self._function(
            "indexer", {**common, "POWERTOOLS_SERVICE_NAME": f"{settings.APP}-indexer"}
        )
        # The purge pipeline's tasks (the state machine, its search settings and its
        # grants come from the Purge, Search and Isolation constructs). It serves no
        # caller either: it works on a deletion named by tenant and id.
        self.functions["purge"] = self._function(
            "purge",
            {
                **common,
                "POWERTOOLS_SERVICE_NAME": f"{settings.APP}-purge",
                "MEMVAULT_TENANT_KEY_ALIAS_PREFIX": settings.TENANT_KEY_ALIAS_PREFIX,
                **environment,
            },
        )
        events.Rule(
            self,
            "SweepSchedule",
            schedule=events.Schedule.rate(settings.SWEEP_SCHEDULE),
            description="remove staged artifact uploads never committed",
            targets=[targets.LambdaFunction(self.functions["sweeper"])],
        )

    def _function(self, name: str, environment: dict[str, str]) -> lambda_.Function:
        limits = settings.FUNCTIONS[name]
        log_group = logs.LogGroup(
            self, f"{name.capitalize()}Logs", retention=settings.LOG_RETENTION
        )
        return lambda_.Function(
            self,
            f"{name.capitalize()}Function",
            runtime=settings.PYTHON_RUNTIME,
            architecture=settings.ARCHITECTURE,
            handler="index.handler",
            # Its entry point compiled (and, for api and direct, what only they load).
            code=function_code(name),
            layers=[self.layer],
            memory_size=limits["memory"],  # type: ignore[arg-type]
            timeout=limits["timeout"],  # type: ignore[arg-type]
            # None unless the deployment reserves some (infra/deployment.py, docs/deploy.md).
            reserved_concurrent_executions=self.reserved.get(name),
            tracing=lambda_.Tracing.ACTIVE,
            log_group=log_group,
            environment=environment,
        )
