"""A stateful property test: random sequences of write / replay / correct / delete /
forget / time passing, across two tenants and two subjects, checked after every step
against a plain-Python model of what must be visible."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    invariant,
    rule,
)
from moto import mock_aws

from memvault_wire.errors import NotFound, VersionConflict
from memvault_wire.memory import MemoryPatch, MemoryWrite
from tests.support.harness import a_write, ctx, make_service

TENANTS = ("acme", "globex")
SUBJECTS = ("u-1", "u-2")
KEYS = ("language", "timezone", None)
TTLS = (30, 600, 86_400)


@dataclass
class Fact:
    """The model of one version chain."""

    tenant: str
    subject: str
    key: str | None
    versions: list[str] = field(default_factory=list)
    expires: dict[str, datetime] = field(default_factory=dict)
    deleted: bool = False

    @property
    def current(self) -> str:
        return self.versions[-1]


class MemoryModel(RuleBasedStateMachine):
    requests = Bundle("requests")

    def __init__(self) -> None:
        super().__init__()
        self._mock = mock_aws()
        self._mock.start()
        self.service, _, self.clock = make_service()
        self.facts: list[Fact] = []
        self.by_memory: dict[str, Fact] = {}
        self.counter = 0

    def teardown(self) -> None:
        self._mock.stop()

    # --------------------------------------------------------------- model helpers

    def _live_fact(self, tenant: str, subject: str, key: str | None) -> Fact | None:
        if key is None:
            return None
        for fact in self.facts:
            if (fact.tenant, fact.subject, fact.key) == (tenant, subject, key) and not fact.deleted:
                return fact
        return None

    def _visible(self, fact: Fact) -> bool:
        return not fact.deleted and self.clock.now() < fact.expires[fact.current]

    # ---------------------------------------------------------------------- rules

    @rule(
        target=requests,
        tenant=st.sampled_from(TENANTS),
        subject=st.sampled_from(SUBJECTS),
        key=st.sampled_from(KEYS),
        ttl=st.sampled_from(TTLS),
    )
    def write(self, tenant: str, subject: str, key: str | None, ttl: int) -> tuple[Any, ...]:
        self.counter += 1
        body = a_write(
            request_id=f"req-{self.counter}",
            canonical_key=key,
            ttl_seconds=ttl,
            content=f"fact {self.counter}",
        )
        result = self.service.write(ctx(tenant, subject), subject, body)
        fact = self._live_fact(tenant, subject, key)
        if fact is None:
            fact = Fact(tenant, subject, key)
            self.facts.append(fact)
        assert result.created
        assert result.memory.version == len(fact.versions) + 1
        fact.versions.append(result.memory.memory_id)
        fact.expires[result.memory.memory_id] = self.clock.now() + timedelta(seconds=ttl)
        self.by_memory[result.memory.memory_id] = fact
        return (tenant, subject, body, result.memory.memory_id)

    @rule(request=requests)
    def replay(self, request: tuple[Any, ...]) -> None:
        tenant, subject, body, memory_id = request
        fact = self.by_memory[memory_id]
        try:
            again = self.service.write(ctx(tenant, subject), subject, body)
        except NotFound:
            assert fact.deleted
            return
        assert not fact.deleted
        assert not again.created
        assert again.memory.memory_id == memory_id

    @rule(request=requests, stale=st.booleans())
    def correct(self, request: tuple[Any, ...], stale: bool) -> None:
        tenant, subject, _, memory_id = request
        fact = self.by_memory[memory_id]
        expected = len(fact.versions) + (1 if stale else 0)
        self.counter += 1
        patch = MemoryPatch(expected_version=expected, content=f"fact {self.counter}")
        try:
            new = self.service.correct(ctx(tenant, subject), subject, memory_id, patch)
        except NotFound:
            assert not self._visible(fact)
            return
        except VersionConflict:
            assert stale
            return
        assert self._visible(fact)
        assert not stale
        assert new.version == len(fact.versions) + 1
        fact.versions.append(new.memory_id)
        fact.expires[new.memory_id] = fact.expires[fact.versions[-2]]
        self.by_memory[new.memory_id] = fact

    @rule(request=consumes(requests))
    def delete(self, request: tuple[Any, ...]) -> None:
        tenant, subject, _, memory_id = request
        fact = self.by_memory[memory_id]
        try:
            self.service.delete(ctx(tenant, subject), subject, memory_id)
        except NotFound:
            assert fact.deleted
            return
        fact.deleted = True

    @rule(tenant=st.sampled_from(TENANTS), subject=st.sampled_from(SUBJECTS))
    def forget(self, tenant: str, subject: str) -> None:
        self.service.forget(ctx(tenant, subject), subject)
        for fact in self.facts:
            if (fact.tenant, fact.subject) == (tenant, subject):
                fact.deleted = True

    @rule(seconds=st.sampled_from((1, 29, 31, 700, 90_000)))
    def time_passes(self, seconds: int) -> None:
        self.clock.advance(seconds=seconds)

    # ----------------------------------------------------------------- invariants

    @invariant()
    def lists_show_exactly_the_visible_current_versions(self) -> None:
        for tenant in TENANTS:
            for subject in SUBJECTS:
                listed = {
                    m.memory_id
                    for m in self.service.list_memories(
                        ctx(tenant, subject), subject, limit=100
                    ).items
                }
                expected = {
                    f.current
                    for f in self.facts
                    if (f.tenant, f.subject) == (tenant, subject) and self._visible(f)
                }
                assert listed == expected

    @invariant()
    def every_id_resolves_to_its_current_version_or_nothing(self) -> None:
        for memory_id, fact in self.by_memory.items():
            own = ctx(fact.tenant, fact.subject)
            other = ctx(next(t for t in TENANTS if t != fact.tenant), fact.subject)
            try:
                got = self.service.get(own, fact.subject, memory_id)
            except NotFound:
                assert not self._visible(fact)
            else:
                assert self._visible(fact)
                assert got.memory_id == fact.current
            try:
                self.service.get(other, fact.subject, memory_id)
            except NotFound:
                pass
            else:
                raise AssertionError("another tenant read a memory")


MemoryModel.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_memory_service_matches_its_model = MemoryModel.TestCase
assert MemoryWrite  # the body type the model drives
