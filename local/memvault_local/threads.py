"""Powertools' REST resolver keeps the request being resolved in shared state: the event
on the ``BaseRouter`` class, the routing context (path parameters among it) on the
resolver. A Lambda execution environment handles one request at a time, so that is
right there; the local server handles requests on threads, where two requests would
read each other's path parameters. ``make_resolver_thread_safe`` gives every thread its
own copy of that state, once, before the server starts. Lambda never runs this.

A route also builds its middleware stack in place on its first request, unlocked: threads
making a route's first requests at once each wrapped the stack the others were building,
and every later request to that route ran the nested stack and answered 500. The build
runs under a lock here, once per route.
"""

from __future__ import annotations

import threading
from abc import ABCMeta
from typing import Any

from aws_lambda_powertools.event_handler import api_gateway

_local = threading.local()
_SHARED = ("current_event", "lambda_context")
_BUILD_LOCK = threading.Lock()


class _PerThread:
    """A class attribute whose value is per thread (``BaseRouter.current_event``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return getattr(_local, self.name, None)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(_local, self.name, value)


class _PerThreadDict:
    """An instance's dict attribute with one dict per (thread, instance)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self
        held: dict[int, Any] = _local.__dict__.setdefault(self.name, {})
        return held.setdefault(id(obj), {} if self.name == "context" else [])

    def __set__(self, obj: Any, value: Any) -> None:
        _local.__dict__.setdefault(self.name, {})[id(obj)] = value


class _ThreadLocalRouterMeta(ABCMeta):
    def __setattr__(cls, name: str, value: Any) -> None:
        if name in _SHARED:
            setattr(_local, name, value)
            return
        super().__setattr__(name, value)


def make_resolver_thread_safe() -> None:
    base: Any = api_gateway.BaseRouter
    if isinstance(base, _ThreadLocalRouterMeta):
        return
    for name in _SHARED:
        type.__setattr__(base, name, _PerThread(name))
    resolver: Any = api_gateway.ApiGatewayResolver
    resolver.context = _PerThreadDict("context")
    resolver.processed_stack_frames = _PerThreadDict("processed_stack_frames")
    route: Any = api_gateway.Route
    build = route._build_middleware_stack

    def build_once(self: Any, router_middlewares: list[Any], app: Any) -> None:
        with _BUILD_LOCK:
            if not self._middleware_stack_built:
                build(self, router_middlewares, app)

    route._build_middleware_stack = build_once
    base.__class__ = _ThreadLocalRouterMeta
