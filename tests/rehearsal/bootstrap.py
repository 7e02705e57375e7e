"""A Lambda-like runtime for one function, run as its own process (the rehearsal's warm
container): ``python -I -S bootstrap.py <handler> <path> [<path> ...]``.

Only the given folders are importable, in order (the function's asset, the layer's
``python/``, then the runtime's boto3), beside the standard library: ``-I -S`` keeps the
test environment's site-packages and ``PYTHONPATH`` out. Each line on stdin is one
invocation, ``{"event": ..., "request_id": ..., "deadline_ms": ...}``; each answer goes,
one line, to the file descriptor named by ``REHEARSAL_ANSWERS`` (after a first line,
``{"ready": true}``, once the handler's module is imported): ``{"result": ...}`` or
the error shape Lambda reports for an unhandled error, ``{"error": {"errorMessage",
"errorType", "stackTrace"}}``. The function's own output (its logs) goes to stdout and
stderr, which the rehearsal keeps in a file.

Every AWS call the function makes is appended to ``REHEARSAL_CALLS`` (JSON lines: the
service, the operation, its parameters and the access key that signed it), and so is
every request to the search domain, for the rehearsal to judge against the function's
IAM role.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
import traceback
from typing import Any


def _record(entry: dict[str, Any]) -> None:
    with open(os.environ["REHEARSAL_CALLS"], "a", encoding="utf-8") as out:
        out.write(json.dumps(entry, default=str) + "\n")


def _instrument() -> None:
    """Record each AWS API call as botocore makes it, and each search request."""
    import botocore.client

    original = botocore.client.BaseClient._make_api_call

    def recorded(self: Any, operation_name: str, api_params: dict[str, Any]) -> Any:
        credentials = self._request_signer._credentials
        key = credentials.get_frozen_credentials().access_key if credentials else None
        entry = {
            "service": self.meta.service_model.service_name,
            "operation": operation_name,
            "params": api_params,
            "access_key": key,
        }
        try:
            answer = original(self, operation_name, api_params)
        except Exception as err:
            entry["error"] = type(err).__name__
            _record(entry)
            raise
        if operation_name == "AssumeRole":
            entry["assumed_key"] = answer["Credentials"]["AccessKeyId"]
        _record(entry)
        return answer

    botocore.client.BaseClient._make_api_call = recorded  # type: ignore[method-assign]

    try:
        import opensearchpy.transport
    except ImportError:
        return
    transport = opensearchpy.transport.Transport
    perform = transport.perform_request

    def searched(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        auth = getattr(self, "kwargs", {}).get("http_auth")
        credentials = getattr(auth, "credentials", None)
        key = getattr(credentials, "access_key", None) if credentials else None
        _record({"service": "es", "operation": method, "params": {"path": url}, "access_key": key})
        return perform(self, method, url, *args, **kwargs)

    transport.perform_request = searched  # type: ignore[method-assign]


class Context:
    """The fields of Lambda's context object that handlers and Powertools read."""

    def __init__(self, request_id: str, deadline_ms: int) -> None:
        name = os.environ["AWS_LAMBDA_FUNCTION_NAME"]
        region = os.environ["AWS_REGION"]
        self.function_name = name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{region}:123456789012:function:{name}"
        self.memory_limit_in_mb = int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"])
        self.aws_request_id = request_id
        self.log_group_name = f"/aws/lambda/{name}"
        self.log_stream_name = "rehearsal"
        self.identity = None
        self.client_context = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        return max(0, self._deadline_ms - int(time.time() * 1000))


def main() -> None:
    handler_name, paths = sys.argv[1], sys.argv[2:]
    sys.path[:0] = paths
    answers = os.fdopen(int(os.environ["REHEARSAL_ANSWERS"]), "w", buffering=1)
    _instrument()
    module_name, function_name = handler_name.rsplit(".", 1)
    init_error: dict[str, Any] | None = None
    handler = None
    try:
        handler = getattr(importlib.import_module(module_name), function_name)
    except Exception as err:  # Lambda reports an init error on every invocation
        init_error = {
            "errorMessage": str(err),
            "errorType": f"Runtime.ImportModuleError: {type(err).__name__}",
            "stackTrace": traceback.format_exc().splitlines(),
        }
    # The init phase is over (Lambda gives it its own 10 s, apart from the timeout).
    answers.write(json.dumps({"ready": True}) + "\n")
    for line in sys.stdin:
        request = json.loads(line)
        if init_error is not None or handler is None:
            answers.write(json.dumps({"error": init_error}) + "\n")
            continue
        context = Context(request["request_id"], request["deadline_ms"])
        try:
            result = handler(request["event"], context)
            answers.write(json.dumps({"result": result}, default=str) + "\n")
        except Exception as err:
            answers.write(
                json.dumps(
                    {
                        "error": {
                            "errorMessage": str(err),
                            "errorType": type(err).__name__,
                            "stackTrace": traceback.format_exc().splitlines(),
                        }
                    }
                )
                + "\n"
            )


if __name__ == "__main__":
    main()
