"""One stack per deployment; it only composes constructs."""

from __future__ import annotations

import json
from typing import Any

from aws_cdk import CfnOutput, Stack
from aws_cdk import aws_lambda as lambda_

from constructs import Construct
from infra.constructs.api import Api
from infra.constructs.compute import Compute
from infra.constructs.data import DataTables
from infra.constructs.isolation import Isolation
from infra.constructs.observability import Observability
from infra.constructs.purge import PurgePipeline
from infra.constructs.search import Search
from infra.constructs.tenancy import TenantKeys
from infra.deployment import Deployment


class MemvaultStack(Stack):
    def __init__(
        self, scope: Construct, construct_id: str, *, deployment: Deployment, **kwargs: Any
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.deployment = deployment
        tenants = [t.tenant_id for t in deployment.tenants]
        self.data = DataTables(
            self, "Data", table_prefix=deployment.table_prefix, production=deployment.production
        )
        self.tenancy = TenantKeys(
            self, "Tenancy", tenants=tenants, production=deployment.production
        )
        self.compute = Compute(
            self,
            "Compute",
            deployment=deployment,
            environment={
                "MEMVAULT_ARTIFACTS_BUCKET": self.data.artifacts.bucket_name,
            },
        )
        functions = self.compute.functions
        # A stable name for the direct-invocation function, for agent runtimes to invoke.
        direct = functions["direct"].node.default_child
        assert isinstance(direct, lambda_.CfnFunction)
        direct.function_name = deployment.direct_function_name
        self.isolation = Isolation(
            self,
            "Isolation",
            pool=deployment.mode == "pool",
            tables=self.data.tables,
            table_key=self.data.key,
            bucket=self.data.artifacts,
            tenant_keys=self.tenancy.keys,
            functions=list(functions.values()),
        )
        # The API and direct-invocation functions both run recall (the same app).
        self.search = Search(
            self,
            "Search",
            deployment=deployment,
            memory_table=self.data.tables["memory"],
            table_key=self.data.key,
            indexer=functions["indexer"],
            readers=[functions["api"], functions["direct"]],
            purger=functions["purge"],
        )
        self.purge = PurgePipeline(
            self,
            "Purge",
            function=functions["purge"],
            # The sweeper starts the purge of a deletion whose start was lost.
            starters=[functions["api"], functions["direct"], functions["sweeper"]],
        )
        self.api = Api(
            self,
            "Api",
            deployment=deployment,
            stack_name=construct_id,
            api_function=functions["api"],
            authorizer_function=functions["authorizer"],
        )
        if self.api.usage_keys:
            functions["authorizer"].add_environment(
                "MEMVAULT_USAGE_KEYS", json.dumps(self.api.usage_keys, sort_keys=True)
            )
        self.observability = Observability(
            self,
            "Observability",
            functions=functions,
            api=self.api.rest_api,
            key=self.data.key,
            search=self.search,
            purge=self.purge.state_machine,
            alarm_email=deployment.alarm_email,
            alarm_topic_arn=deployment.alarm_topic_arn,
        )
        CfnOutput(self, "ApiUrl", value=self.api.rest_api.url)
        CfnOutput(
            self,
            "AlarmTopicArn",
            value=self.observability.topic.topic_arn,
            description="the topic every alarm publishes to: subscribe on-call here",
        )
        # What agent runtimes invoke directly (the memvault SDK's Lambda transport).
        direct = functions["direct"]
        CfnOutput(self, "DirectFunctionName", value=direct.function_name)
        CfnOutput(self, "DirectFunctionArn", value=direct.function_arn)
        CfnOutput(self, "Mode", value=deployment.mode)
        CfnOutput(self, "SearchEndpoint", value=self.search.endpoint)
