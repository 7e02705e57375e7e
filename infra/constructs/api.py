"""API Gateway (REST) in front of the API function, with the Lambda authorizer."""

from __future__ import annotations

import hashlib
import json

from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_wafv2 as wafv2

from constructs import Construct
from infra import settings
from infra.constructs.tenancy import logical
from infra.deployment import Deployment

PUBLIC_ROUTES = ("health", "openapi.json")


#: Gateway response templates are not VTL: API Gateway only substitutes ``$context``
#: variables. ``$context.error.messageString`` is the gateway's message already quoted as
#: a JSON string; the response type (an upper-case name) and the request id (the
#: correlation id the functions log) are placed inside quotes.
GATEWAY_MESSAGE = "$context.error.messageString"
CORRELATION_ID = "$context.requestId"
RESPONSE_TYPE = "$context.error.responseType"


def _error_template(code: str, message: str | None, **details: str) -> dict[str, str]:
    """The API's error envelope; ``message=None`` takes the gateway's own message."""
    slot = "<gateway message>"
    body = json.dumps(
        {
            "error": {
                "code": code,
                "message": slot if message is None else message,
                "details": {"correlation_id": CORRELATION_ID, **details},
            }
        }
    )
    return {"application/json": body.replace(json.dumps(slot), GATEWAY_MESSAGE)}


def usage_key(stack_name: str, tenant_id: str) -> str:
    """The API key value that identifies a tenant's usage plan (not a credential: the JWT
    authenticates; the authorizer names this key for the caller's tenant)."""
    return hashlib.sha256(f"{stack_name}:{tenant_id}".encode()).hexdigest()[:40]


class Api(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: Deployment,
        stack_name: str,
        api_function: lambda_.IFunction,
        authorizer_function: lambda_.IFunction,
    ) -> None:
        super().__init__(scope, construct_id)
        access_logs = logs.LogGroup(self, "AccessLogs", retention=settings.ACCESS_LOG_RETENTION)
        pool = deployment.mode == "pool"
        self.rest_api = apigw.RestApi(
            self,
            "RestApi",
            rest_api_name=stack_name,
            description="memvault HTTP API (docs/api.md)",
            endpoint_types=[apigw.EndpointType.REGIONAL],
            cloud_watch_role=True,
            api_key_source_type=apigw.ApiKeySourceType.AUTHORIZER if pool else None,
            deploy_options=apigw.StageOptions(
                stage_name="prod",
                tracing_enabled=True,
                metrics_enabled=True,
                logging_level=apigw.MethodLoggingLevel.ERROR,
                data_trace_enabled=False,  # would log request bodies: memory content
                throttling_rate_limit=settings.STAGE_RATE_LIMIT,
                throttling_burst_limit=settings.STAGE_BURST_LIMIT,
                access_log_destination=apigw.LogGroupLogDestination(access_logs),
                access_log_format=apigw.AccessLogFormat.json_with_standard_fields(
                    caller=False,
                    http_method=True,
                    ip=True,
                    protocol=True,
                    request_time=True,
                    resource_path=True,
                    response_length=True,
                    status=True,
                    user=False,
                ),
            ),
        )
        self._gateway_responses()
        self.authorizer = apigw.TokenAuthorizer(
            self,
            "Authorizer",
            handler=authorizer_function,
            identity_source="method.request.header.Authorization",
            results_cache_ttl=settings.AUTHORIZER_CACHE,
        )
        integration = apigw.LambdaIntegration(api_function)
        validator = self.rest_api.add_request_validator(
            "Validator", validate_request_parameters=True, validate_request_body=True
        )
        v1 = self.rest_api.root.add_resource("v1")
        for route in PUBLIC_ROUTES:
            v1.add_resource(route).add_method("GET", integration)
        proxy = v1.add_resource("{proxy+}")
        proxy.add_method(
            "ANY",
            integration,
            authorizer=self.authorizer,
            authorization_type=apigw.AuthorizationType.CUSTOM,
            request_validator=validator,
            request_parameters={"method.request.path.proxy": True},
            api_key_required=pool,
        )
        self.usage_keys: dict[str, str] = {}
        if pool:
            self._usage_plans(deployment, stack_name)
        if deployment.enable_waf:
            self._waf()

    def _gateway_responses(self) -> None:
        """Errors API Gateway answers itself, in the API's error envelope. The status stays
        API Gateway's own (a 403, 404, 413, 429 or 504 stays one) except where noted; a
        response type without an entry here falls to DEFAULT_4XX or DEFAULT_5XX, which
        set no status at all and carry the gateway's message and response type."""
        R = apigw.ResponseType
        answers: dict[apigw.ResponseType, tuple[str | None, str, str]] = {
            R.UNAUTHORIZED: (
                None,  # 401
                "unauthorized",
                "send a valid token as 'Authorization: Bearer <JWT>'",
            ),
            # An AWS (SigV4) token past its time; JWTs that expire are UNAUTHORIZED.
            R.EXPIRED_TOKEN: ("401", "unauthorized", "the credentials have expired"),
            R.ACCESS_DENIED: (None, "forbidden", "the token does not allow this"),  # 403
            R.INVALID_API_KEY: (None, "forbidden", "no usage plan for this tenant"),  # 403
            R.WAF_FILTERED: (None, "forbidden", "the request was blocked by the firewall"),
            # No route matched (this API has no IAM authorization, so the gateway's 403
            # "Missing Authentication Token" can only mean an unknown path or method).
            R.MISSING_AUTHENTICATION_TOKEN: ("404", "not_found", "no such route"),
            R.RESOURCE_NOT_FOUND: (None, "not_found", "no such route"),  # 404
            R.THROTTLED: (None, "throttled", "too many requests; retry later"),  # 429
            R.QUOTA_EXCEEDED: (None, "throttled", "the tenant's quota is spent"),  # 429
            R.REQUEST_TOO_LARGE: (None, "payload_too_large", "the request is too large"),
            R.BAD_REQUEST_BODY: (None, "validation_failed", "the request body is invalid"),
            R.BAD_REQUEST_PARAMETERS: (
                None,  # 400
                "validation_failed",
                "the request's parameters are invalid",
            ),
            R.INTEGRATION_TIMEOUT: (
                None,  # 504
                "gateway_timeout",
                "the request took too long; retry it (writes are idempotent by request_id)",
            ),
        }
        for kind, (status, code, message) in answers.items():
            self.rest_api.add_gateway_response(
                f"Gateway{kind.response_type}",
                type=kind,
                status_code=status,
                templates=_error_template(code, message),
            )
        for kind, code in ((R.DEFAULT_4_XX, "request_rejected"), (R.DEFAULT_5_XX, "internal")):
            self.rest_api.add_gateway_response(
                f"Gateway{kind.response_type}",
                type=kind,
                templates=_error_template(code, None, response_type=RESPONSE_TYPE),
            )

    def _usage_plans(self, deployment: Deployment, stack_name: str) -> None:
        for tenant in deployment.tenants:
            value = usage_key(stack_name, tenant.tenant_id)
            key = self.rest_api.add_api_key(
                f"Key{logical(tenant.tenant_id)}",
                value=value,
                api_key_name=f"{stack_name}-{tenant.tenant_id}",
            )
            plan = self.rest_api.add_usage_plan(
                f"Plan{logical(tenant.tenant_id)}",
                name=f"{stack_name}-{tenant.tenant_id}",
                throttle=apigw.ThrottleSettings(
                    rate_limit=tenant.quota.rate_limit, burst_limit=tenant.quota.burst_limit
                ),
                quota=apigw.QuotaSettings(
                    limit=tenant.quota.monthly_requests, period=apigw.Period.MONTH
                ),
            )
            plan.add_api_stage(stage=self.rest_api.deployment_stage)
            plan.add_api_key(key)
            self.usage_keys[tenant.tenant_id] = value

    def _waf(self) -> None:
        rules = [
            wafv2.CfnWebACL.RuleProperty(
                name=name,
                priority=i,
                override_action={"none": {}},
                statement=wafv2.CfnWebACL.StatementProperty(
                    managed_rule_group_statement=wafv2.CfnWebACL.ManagedRuleGroupStatementProperty(
                        vendor_name="AWS", name=name
                    )
                ),
                visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                    cloud_watch_metrics_enabled=True,
                    metric_name=name,
                    sampled_requests_enabled=False,
                ),
            )
            for i, name in enumerate(
                ["AWSManagedRulesCommonRuleSet", "AWSManagedRulesKnownBadInputsRuleSet"]
            )
        ]
        acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            default_action={"allow": {}},
            scope="REGIONAL",
            rules=rules,
            visibility_config=wafv2.CfnWebACL.VisibilityConfigProperty(
                cloud_watch_metrics_enabled=True,
                metric_name="memvault",
                sampled_requests_enabled=False,
            ),
        )
        wafv2.CfnWebACLAssociation(
            self,
            "WebAclAssociation",
            web_acl_arn=acl.attr_arn,
            resource_arn=self.rest_api.deployment_stage.stage_arn,
        )
