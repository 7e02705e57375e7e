"""API Gateway (REST) in front of the rehearsed functions, as the template configures it:
its resources and methods route a request, the TOKEN authorizer runs first (its policy
cached per token for the authorizer's TTL and judged against each route's method ARN),
usage-plan keys are required where a method says so, the Lambda proxy event is built as
API Gateway builds it, and every answer API Gateway makes itself is rendered from the
template's gateway responses (or API Gateway's own default when there is none).
"""

from __future__ import annotations

import fnmatch
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.rehearsal.runtime import InvocationError
from tests.rehearsal.template import ACCOUNT, REGION, Template

#: API Gateway's own status and message for each response type it answers itself.
DEFAULTS = {
    "MISSING_AUTHENTICATION_TOKEN": (403, "Missing Authentication Token"),
    "UNAUTHORIZED": (401, "Unauthorized"),
    "EXPIRED_TOKEN": (403, "The security token included in the request is expired"),
    "ACCESS_DENIED": (403, "User is not authorized to access this resource"),
    "AUTHORIZER_FAILURE": (500, "AuthorizerFailure"),
    "AUTHORIZER_CONFIGURATION_ERROR": (500, "AuthorizerConfigurationException"),
    "INVALID_API_KEY": (403, "Forbidden"),
    "REQUEST_TOO_LARGE": (413, "Request Too Long"),
    "INTEGRATION_FAILURE": (502, "Internal server error"),
    "INTEGRATION_TIMEOUT": (504, "Endpoint request timed out"),
    "THROTTLED": (429, "Too Many Requests"),
    "WAF_FILTERED": (403, "Forbidden"),
}
#: API Gateway's limit on a request's payload.
MAX_PAYLOAD = 10 * 1024 * 1024
STAGE = "prod"


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: str
    #: Who answered: "gateway" (a gateway response) or "function".
    source: str

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Gateway:
    """``functions`` resolves a function's ARN to its process (``Runtime.by_function_name``)."""

    template: Template
    functions: Any
    cache: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        t = self.template
        self.resources = {
            k: v["Properties"] for k, v in t.of_type("AWS::ApiGateway::Resource").items()
        }
        self.methods = [v["Properties"] for v in t.of_type("AWS::ApiGateway::Method").values()]
        self.responses = {
            v["Properties"]["ResponseType"]: v["Properties"]
            for v in t.of_type("AWS::ApiGateway::GatewayResponse").values()
        }
        self.api_keys = {
            str(t.resolve(v["Properties"].get("Value")))
            for v in t.of_type("AWS::ApiGateway::ApiKey").values()
        }
        ((self.authorizer_id, authorizer),) = t.of_type("AWS::ApiGateway::Authorizer").items()
        props = authorizer["Properties"]
        self.authorizer_ttl = int(props.get("AuthorizerResultTtlInSeconds", 300))
        self.authorizer_type = props.get("Type")
        source = str(props.get("IdentitySource", ""))
        self.identity_header = source.removeprefix("method.request.header.")
        uri = str(t.resolve(props["AuthorizerUri"]))
        self.authorizer = self.functions(_function_in_uri(uri))
        self.permissions = [
            t.resolve(v["Properties"]) for v in t.of_type("AWS::Lambda::Permission").values()
        ]

    def permitted(self, function_arn: str, source_arn: str) -> bool:
        """Whether a resource policy statement lets API Gateway invoke the function for
        this source ARN (the ``AWS::Lambda::Permission`` resources)."""
        return any(
            p.get("Principal") == "apigateway.amazonaws.com"
            and p.get("Action") == "lambda:InvokeFunction"
            and p.get("FunctionName") == function_arn
            and fnmatch.fnmatchcase(source_arn, str(p.get("SourceArn", "*")))
            for p in self.permissions
        )

    # ------------------------------------------------------------------ routing

    def _path_of(self, logical: str) -> str:
        props = self.resources[logical]
        parent = props["ParentId"]
        part = props["PathPart"]
        if isinstance(parent, dict) and "Ref" in parent and parent["Ref"] in self.resources:
            return f"{self._path_of(parent['Ref'])}/{part}"
        return f"/{part}"

    def route(self, method: str, path: str) -> tuple[dict[str, Any], str, dict[str, str]] | None:
        """(method, resource path, path parameters) for a request, or None."""
        found = []
        for props in self.methods:
            resource = props["ResourceId"]["Ref"]
            template_path = self._path_of(resource)
            if props["HttpMethod"] not in (method, "ANY"):
                continue
            if template_path.endswith("/{proxy+}"):
                base = template_path.removesuffix("/{proxy+}")
                if path.startswith(base + "/") and len(path) > len(base) + 1:
                    found.append((1, props, template_path, {"proxy": path[len(base) + 1 :]}))
            elif template_path == path:
                found.append((0, props, template_path, {}))
        if not found:
            return None
        found.sort(key=lambda f: f[0])  # a literal resource wins over a greedy one
        _, props, template_path, params = found[0]
        return props, template_path, params

    # ---------------------------------------------------------------- answers

    def gateway_response(self, kind: str, request_id: str) -> Answer:
        status, message = DEFAULTS[kind]
        response = self.responses.get(kind) or self.responses.get(
            "DEFAULT_4XX" if status < 500 else "DEFAULT_5XX"
        )
        if response is None:
            return Answer(status, {}, json.dumps({"message": message}), "gateway")
        if response.get("StatusCode"):
            status = int(response["StatusCode"])
        body = response.get("ResponseTemplates", {}).get("application/json")
        if body is None:
            body = json.dumps({"message": message})
        for variable, value in {
            "$context.error.messageString": json.dumps(message),
            "$context.error.message": message,
            "$context.error.responseType": kind,
            "$context.requestId": request_id,
        }.items():
            body = body.replace(variable, value)
        headers = {
            k.removeprefix("gatewayresponse.header."): str(v).strip("'")
            for k, v in (response.get("ResponseParameters") or {}).items()
        }
        return Answer(status, headers, body, "gateway")

    def request(
        self,
        method: str,
        path: str,
        *,
        token: str | None = None,
        body: Any = None,
        query: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        raw_body: str | None = None,
    ) -> Answer:
        request_id = str(uuid.uuid4())
        text = raw_body if raw_body is not None else (None if body is None else json.dumps(body))
        if text is not None and len(text.encode()) > MAX_PAYLOAD:
            return self.gateway_response("REQUEST_TOO_LARGE", request_id)
        routed = self.route(method, path)
        if routed is None:
            return self.gateway_response("MISSING_AUTHENTICATION_TOKEN", request_id)
        props, resource_path, params = routed
        method_arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:rehearsal/{STAGE}/{method}{path}"
        all_headers = dict(headers or {})
        if token is not None:
            all_headers["Authorization"] = token
        integration = props.get("Integration", {})
        if integration.get("Type") != "AWS_PROXY":
            return self.gateway_response("INTEGRATION_FAILURE", request_id)
        function_arn = _function_in_uri(str(self.template.resolve(integration["Uri"])))
        authorizer_context: dict[str, Any] = {}
        if props.get("AuthorizationType") == "CUSTOM":
            if self.authorizer_type != "TOKEN" or props.get("AuthorizerId") != {
                "Ref": self.authorizer_id
            }:
                return self.gateway_response("AUTHORIZER_CONFIGURATION_ERROR", request_id)
            header = next(
                (v for k, v in all_headers.items() if k.lower() == self.identity_header.lower()),
                None,
            )
            decided = self._authorize(header, method_arn, request_id)
            if isinstance(decided, Answer):
                return decided
            authorizer_context = decided
            if props.get("ApiKeyRequired") and (
                authorizer_context.get("usageIdentifierKey") not in self.api_keys
            ):
                return self.gateway_response("INVALID_API_KEY", request_id)
        event = {
            "resource": resource_path,
            "path": path,
            "httpMethod": method,
            "headers": all_headers or None,
            "multiValueHeaders": {k: [v] for k, v in all_headers.items()} or None,
            "queryStringParameters": query or None,
            "multiValueQueryStringParameters": {k: [v] for k, v in (query or {}).items()} or None,
            "pathParameters": params or None,
            "stageVariables": None,
            "requestContext": {
                "accountId": ACCOUNT,
                "apiId": "rehearsal",
                "authorizer": authorizer_context.get("context_out") or None,
                "httpMethod": method,
                "path": f"/{STAGE}{path}",
                "protocol": "HTTP/1.1",
                "requestId": request_id,
                "resourcePath": resource_path,
                "stage": STAGE,
                "identity": {"sourceIp": "127.0.0.1", "userAgent": "rehearsal"},
            },
            "body": text,
            "isBase64Encoded": False,
        }
        if not self.permitted(function_arn, method_arn):  # API Gateway may not invoke it
            return Answer(500, {}, json.dumps({"message": "Internal server error"}), "gateway")
        try:
            answer = self.functions(function_arn).invoke(event)
        except InvocationError as err:
            if "Task timed out" in str(err.payload.get("errorMessage")):
                return self.gateway_response("INTEGRATION_TIMEOUT", request_id)
            return self.gateway_response("INTEGRATION_FAILURE", request_id)
        if (
            not isinstance(answer, dict)
            or not isinstance(answer.get("statusCode"), int)
            or not isinstance(answer.get("body"), str | None)
            or not isinstance(answer.get("headers") or {}, dict)
        ):  # a malformed Lambda proxy response
            return self.gateway_response("INTEGRATION_FAILURE", request_id)
        return Answer(
            int(answer["statusCode"]),
            dict(answer.get("headers") or {}),
            answer.get("body") or "",
            "function",
        )

    def _authorize(
        self, header: str | None, method_arn: str, request_id: str
    ) -> dict[str, Any] | Answer:
        if not header:
            return self.gateway_response("UNAUTHORIZED", request_id)
        policy = self.cache.get(header)
        authorizer_arn = (
            f"arn:aws:execute-api:{REGION}:{ACCOUNT}:rehearsal/authorizers/{self.authorizer_id}"
        )
        if policy is None and not self.permitted(self.authorizer.invoked_arn, authorizer_arn):
            return self.gateway_response("AUTHORIZER_CONFIGURATION_ERROR", request_id)
        if policy is None:
            try:
                policy = self.authorizer.invoke(
                    {"type": "TOKEN", "authorizationToken": header, "methodArn": method_arn}
                )
            except InvocationError as err:
                if err.payload.get("errorMessage") == "Unauthorized":
                    return self.gateway_response("UNAUTHORIZED", request_id)
                return self.gateway_response("AUTHORIZER_FAILURE", request_id)
            context = policy.get("context") if isinstance(policy, dict) else None
            if (
                not isinstance(policy, dict)
                or "policyDocument" not in policy
                or not policy.get("principalId")
                or not all(
                    isinstance(v, str | int | float | bool) for v in (context or {}).values()
                )
            ):  # API Gateway takes only primitive context values
                return self.gateway_response("AUTHORIZER_CONFIGURATION_ERROR", request_id)
            if self.authorizer_ttl:
                self.cache[header] = policy
        if not allows(policy["policyDocument"], method_arn):
            return self.gateway_response("ACCESS_DENIED", request_id)
        context = dict(policy.get("context") or {})
        context["principalId"] = policy.get("principalId")
        return {"context_out": context, "usageIdentifierKey": policy.get("usageIdentifierKey")}


def _function_in_uri(uri: str) -> str:
    """The function ARN inside a Lambda integration or authorizer URI."""
    return uri.split("/functions/", 1)[1].removesuffix("/invocations")


def allows(document: dict[str, Any], method_arn: str) -> bool:
    """An authorizer's policy judged for one method ARN: an explicit Deny wins."""
    allowed = False
    statements = document.get("Statement", [])
    for statement in statements if isinstance(statements, list) else [statements]:
        actions = statement.get("Action", [])
        actions = actions if isinstance(actions, list) else [actions]
        if not any(fnmatch.fnmatchcase("execute-api:Invoke", a) for a in actions):
            continue
        resources = statement.get("Resource", [])
        resources = resources if isinstance(resources, list) else [resources]
        if any(fnmatch.fnmatchcase(method_arn, r) for r in resources):
            if statement.get("Effect") == "Deny":
                return False
            allowed = True
    return allowed
