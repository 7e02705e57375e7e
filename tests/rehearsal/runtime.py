"""Running the deployed functions as Lambda would: each from its built asset folders only,
in its own process, with the template's environment.

``FunctionProcess`` is one warm container of one function (``bootstrap.py`` inside);
``Runtime`` holds the containers of a stack and answers Lambda's ``Invoke`` for moto's
Step Functions interpreter, with faults (throttles, crashes) injected where a test asks.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.rehearsal.template import ACCOUNT, REGION

BOOTSTRAP = Path(__file__).with_name("bootstrap.py")
#: What the Lambda Python runtime provides beside the standard library.
RUNTIME_PACKAGES = ("boto3", "botocore", "s3transfer", "jmespath", "dateutil", "six", "urllib3")
#: Lambda's limit on the init phase (importing the handler's module), apart from the timeout.
INIT_TIMEOUT_S = 10.0


def runtime_boto(target: Path) -> Path:
    """A folder holding only the packages the Lambda Python runtime provides (boto3 and
    what it needs), linked from this interpreter's site-packages."""
    import boto3

    site = Path(boto3.__file__).resolve().parents[1]
    target.mkdir(parents=True, exist_ok=True)
    for name in RUNTIME_PACKAGES:
        source = site / name
        if not source.exists():
            source = site / f"{name}.py"
        link = target / source.name
        if source.exists() and not link.exists():
            link.symlink_to(source)
    return target


class InvocationError(Exception):
    """Lambda reported an error: ``payload`` is its error shape."""

    def __init__(self, payload: dict[str, Any]) -> None:
        super().__init__(payload.get("errorType"), payload.get("errorMessage"))
        self.payload = payload


@dataclass
class FunctionProcess:
    """One warm container: started on the first invocation, one invocation at a time."""

    name: str
    function_name: str
    handler: str
    paths: list[Path]
    environment: dict[str, str]
    memory_mb: int
    timeout_s: int
    workdir: Path
    _process: subprocess.Popen[bytes] | None = None
    _answers: Any = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    invocations: int = 0

    @property
    def invoked_arn(self) -> str:
        return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{self.function_name}"

    @property
    def calls_file(self) -> Path:
        return self.workdir / f"{self.name}.calls.jsonl"

    @property
    def log_file(self) -> Path:
        return self.workdir / f"{self.name}.log"

    def _start(self) -> None:
        read, write = os.pipe()
        env = {
            "PATH": "/usr/bin:/bin",
            "LANG": "C.UTF-8",
            "TZ": "UTC",
            "AWS_REGION": REGION,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_LAMBDA_FUNCTION_NAME": self.function_name,
            "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(self.memory_mb),
            "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
            "AWS_EXECUTION_ENV": "AWS_Lambda_python3.14",
            "_HANDLER": self.handler,
            "LAMBDA_TASK_ROOT": str(self.paths[0]),
            **self.environment,
            "REHEARSAL_ANSWERS": str(write),
            "REHEARSAL_CALLS": str(self.calls_file),
        }
        log = self.log_file.open("ab")
        self._process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(BOOTSTRAP), self.handler, *map(str, self.paths)],
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            pass_fds=(write,),
            cwd=self.paths[0],
        )
        os.close(write)
        self._answers = os.fdopen(read, "r")
        # Lambda's init phase (the handler's module imported) has its own limit, apart
        # from the function's timeout, which counts from the invocation.
        ready, _, _ = select.select([self._answers], [], [], INIT_TIMEOUT_S)
        hello = self._answers.readline() if ready else ""
        if not hello:
            self._process.kill()
            self._process.wait()
            self._process = None
            raise InvocationError(
                {
                    "errorType": "Sandbox.Timedout",
                    "errorMessage": f"Init timed out after {INIT_TIMEOUT_S:.2f} seconds",
                }
            )

    def invoke(self, event: Any) -> Any:
        """Run one invocation; raises ``InvocationError`` with Lambda's error shape."""
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            assert self._process is not None and self._process.stdin is not None
            self.invocations += 1
            request = {
                "event": event,
                "request_id": f"{self.name}-{self.invocations}",
                "deadline_ms": int(time.time() * 1000) + self.timeout_s * 1000,
            }
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
            ready, _, _ = select.select([self._answers], [], [], self.timeout_s)
            if not ready:  # Lambda stops the invocation at its timeout
                self._process.kill()
                self._process.wait()
                self._process = None
                raise InvocationError(
                    {
                        "errorType": "Sandbox.Timedout",
                        "errorMessage": f"Task timed out after {self.timeout_s:.2f} seconds",
                    }
                )
            line = self._answers.readline()
            if not line:  # the process died mid-invocation
                self._process.wait()
                self._process = None
                raise InvocationError(
                    {"errorType": "Runtime.ExitError", "errorMessage": "the runtime exited"}
                )
            answer = json.loads(line)
        if "error" in answer:
            raise InvocationError(answer["error"])
        return answer["result"]

    def crash(self) -> None:
        """Kill the container (the next invocation starts a cold one)."""
        with self._lock:
            if self._process is not None:
                self._process.kill()
                self._process.wait()
                self._process = None

    def stop(self) -> None:
        self.crash()

    def calls(self) -> list[dict[str, Any]]:
        if not self.calls_file.exists():
            return []
        return [json.loads(line) for line in self.calls_file.read_text().splitlines()]


class Throttled(Exception):
    """Lambda refused the invocation (``TooManyRequestsException``)."""


@dataclass
class Fault:
    """A fault at the purge tasks whose payload has ``action`` (and ``copy``): ``throttle``
    (Lambda refuses the invocation) or ``crash`` (the function does its work, then its
    process dies before answering: Lambda reports ``Runtime.ExitError``), ``times`` times.
    """

    action: str
    kind: str
    copy: str | None = None
    times: int = 1

    def matches(self, event: Any) -> bool:
        return (
            self.times > 0
            and isinstance(event, dict)
            and event.get("action") == self.action
            and (self.copy is None or event.get("copy") == self.copy)
        )


EXIT_ERROR = {
    "errorType": "Runtime.ExitError",
    "errorMessage": "RequestId: rehearsal Error: Runtime exited with error: signal: killed",
}


@dataclass
class Runtime:
    functions: dict[str, FunctionProcess]
    faults: list[Fault] = field(default_factory=list)
    task_log: list[tuple[str, str]] = field(default_factory=list)

    def by_function_name(self, name_or_arn: str) -> FunctionProcess:
        """The function a name or ARN names, exactly: its region, account and no
        qualifier (or ``$LATEST``); anything else is Lambda's ResourceNotFound."""
        name = name_or_arn
        if name_or_arn.startswith("arn:"):
            parts = name_or_arn.split(":")
            if parts[3] != REGION or parts[4] != ACCOUNT or len(parts) not in (7, 8):
                raise KeyError(name_or_arn)
            if len(parts) == 8 and parts[7] != "$LATEST":
                raise KeyError(name_or_arn)
            name = parts[6]
        for process in self.functions.values():
            if process.function_name == name:
                return process
        raise KeyError(name_or_arn)

    def lambda_invoke(self, function_name: str, body: Any) -> tuple[bytes, bool]:
        """What Lambda answers an ``Invoke`` (Step Functions' tasks): (payload, errored);
        raises ``Throttled`` for a throttle."""
        process = self.by_function_name(function_name)
        event = json.loads(body) if isinstance(body, str | bytes) else body
        label = event.get("action", "?") if isinstance(event, dict) else "?"
        if isinstance(event, dict) and event.get("copy"):
            label += f" {event['copy']}"
        fault = next((f for f in self.faults if f.matches(event)), None)
        if fault is not None:
            fault.times -= 1
            if fault.kind == "throttle":
                self.task_log.append((label, "throttled"))
                raise Throttled(label)
        try:
            result = process.invoke(event)
        except InvocationError as err:
            self.task_log.append((label, str(err.payload.get("errorType"))))
            return json.dumps(err.payload).encode(), True
        if fault is not None and fault.kind == "crash":
            process.crash()
            self.task_log.append((label, "crashed after its work"))
            return json.dumps(EXIT_ERROR).encode(), True
        self.task_log.append((label, "ok"))
        return json.dumps(result).encode(), False

    def stop(self) -> None:
        for process in self.functions.values():
            process.stop()
