"""Artifacts: staged uploads to S3 (moto) under the tenant's KMS key, committed only when
the bytes match, read by pinned version, swept when never committed.

moto does not check ``x-amz-checksum-sha256`` on upload, expires no presigned URL, and
accepts any encryption context on S3; so commit verifies the hash itself (tested here),
URL lifetimes are tested by the URL's own expiry parameter, and the encryption-context
binding is tested against KMS directly."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
import requests

from memvault.models.access import Scope
from memvault.services.artifacts import ArtifactService
from memvault.services.bundle import Services
from memvault_wire.artifact import ArtifactState, StartUpload
from memvault_wire.errors import (
    ArtifactReferenced,
    ChecksumMismatch,
    Forbidden,
    MediaTypeNotAllowed,
    NotFound,
    PayloadTooLarge,
    UploadIncomplete,
)
from memvault_wire.memory import Sensitivity
from tests.support.harness import FakeClock, ctx

#: S3 presigning, SSE-KMS and object versions; the embedded object store has its own
#: tests (tests/integration/test_artifacts_local.py, tests/storage/test_objects_port.py).
pytestmark = pytest.mark.aws

EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}
DATA = b"tool result: 42 rows, all reconciled\n" * 100


@pytest.fixture
def artifacts(services: Services) -> ArtifactService:
    return services.artifacts


def me(tenant: str = "acme", subject: str = "u-1") -> Any:
    return ctx(tenant, subject, scopes=EVERYTHING)


def top(tenant: str = "acme", subject: str = "u-1") -> Any:
    """The subject's own token at the top ceiling: it may read whatever references an
    artifact, so references are named to it."""
    return ctx(tenant, subject, scopes=EVERYTHING, max_sensitivity=Sensitivity.PII)


def start(artifacts: ArtifactService, data: bytes = DATA, **extra: Any) -> Any:
    body = StartUpload.model_validate(
        {
            "request_id": extra.pop("request_id", "up-1"),
            "media_type": "text/plain",
            "size_bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            **extra,
        }
    )
    out, _ = artifacts.start(me(), "u-1", body)
    return out


def put(upload: Any, data: bytes) -> int:
    return requests.put(upload.url, data=data, headers=upload.headers, timeout=10).status_code


def test_upload_commit_and_read_back_the_exact_bytes(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    assert staged.state is ArtifactState.STAGED
    assert staged.upload.headers["x-amz-server-side-encryption"] == "aws:kms"
    assert put(staged.upload, DATA) == 200

    committed = artifacts.commit(me(), "u-1", staged.artifact_id)
    assert committed.state is ArtifactState.COMMITTED
    read = artifacts.get(me(), "u-1", staged.artifact_id)
    assert requests.get(read.download.url, timeout=10).content == DATA


def test_the_object_is_encrypted_with_the_tenants_key(
    artifacts: ArtifactService, services: Services
) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    head = services.artifacts.objects.s3.head_object(
        Bucket="test-artifacts", Key=f"acme/u-1/{staged.artifact_id}"
    )
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"].endswith("alias/memvault/acme")


@pytest.mark.parametrize("sent", [DATA[:-1], DATA[:-1] + b"X"], ids=["size", "hash"])
def test_a_mismatch_is_refused_and_nothing_committed(
    artifacts: ArtifactService, sent: bytes
) -> None:
    staged = start(artifacts)
    put(staged.upload, sent)
    with pytest.raises(ChecksumMismatch):
        artifacts.commit(me(), "u-1", staged.artifact_id)
    assert artifacts.get(me(), "u-1", staged.artifact_id).state is ArtifactState.STAGED
    put(staged.upload, DATA)  # upload again and retry
    assert artifacts.commit(me(), "u-1", staged.artifact_id).state is ArtifactState.COMMITTED


def test_commit_before_any_upload_is_upload_incomplete(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    with pytest.raises(UploadIncomplete):
        artifacts.commit(me(), "u-1", staged.artifact_id)


def test_a_reupload_after_commit_does_not_change_what_is_read(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    artifacts.commit(me(), "u-1", staged.artifact_id)
    assert put(staged.upload, b"replaced behind our back") == 200  # URL still valid
    read = artifacts.get(me(), "u-1", staged.artifact_id)
    assert requests.get(read.download.url, timeout=10).content == DATA


def test_urls_are_short_lived(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    artifacts.commit(me(), "u-1", staged.artifact_id)
    download = artifacts.get(me(), "u-1", staged.artifact_id).download
    assert int(parse_qs(urlparse(download.url).query)["X-Amz-Expires"][0]) <= 300
    assert int(parse_qs(urlparse(staged.upload.url).query)["X-Amz-Expires"][0]) <= 900


def test_other_tenants_get_404_and_other_subjects_403(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    with pytest.raises(NotFound):
        artifacts.get(me("globex"), "u-1", staged.artifact_id)
    with pytest.raises(Forbidden):
        artifacts.get(me("acme", "u-2"), "u-1", staged.artifact_id)


def test_an_artifact_above_the_callers_ceiling_is_absent_on_every_route(
    artifacts: ArtifactService,
) -> None:
    """Security review (issue 18): a ``public`` token replayed the owner's upload request
    id and got the internal artifact's metadata, committed its upload and deleted it."""
    from memvault_wire.memory import Sensitivity

    low = ctx("acme", "u-1", scopes=EVERYTHING, max_sensitivity=Sensitivity.PUBLIC)
    staged = start(artifacts)  # internal
    replay = StartUpload.model_validate(
        {
            "request_id": "up-1",
            "media_type": "text/plain",
            "size_bytes": len(DATA),
            "sha256": hashlib.sha256(DATA).hexdigest(),
        }
    )
    other_payload = replay.model_copy(update={"size_bytes": 1})
    for attempt in (replay, other_payload):
        with pytest.raises(NotFound) as raised:
            artifacts.start(low, "u-1", attempt)
        assert staged.artifact_id not in str(raised.value.to_body())
    assert put(staged.upload, DATA) == 200
    with pytest.raises(NotFound):
        artifacts.commit(low, "u-1", staged.artifact_id)
    assert artifacts.get(me(), "u-1", staged.artifact_id).state is ArtifactState.STAGED
    artifacts.commit(me(), "u-1", staged.artifact_id)
    with pytest.raises(NotFound):
        artifacts.delete(low, "u-1", staged.artifact_id)
    assert artifacts.get(me(), "u-1", staged.artifact_id).state is ArtifactState.COMMITTED


def test_limits_are_clear_refusals(artifacts: ArtifactService) -> None:
    with pytest.raises(PayloadTooLarge):
        artifacts.start(
            me(),
            "u-1",
            StartUpload(
                request_id="big", media_type="text/plain", size_bytes=10**12, sha256="0" * 64
            ),
        )
    with pytest.raises(MediaTypeNotAllowed):
        artifacts.start(
            me(),
            "u-1",
            StartUpload(
                request_id="exe",
                media_type="application/x-msdownload",
                size_bytes=10,
                sha256="0" * 64,
            ),
        )


def test_a_referenced_artifact_is_not_deleted(artifacts: ArtifactService) -> None:
    from tests.support.artifacts import committed_artifact

    artifact_id, _ = committed_artifact(artifacts, me(), "u-1", DATA)
    artifacts.store.add_reference("acme", "u-1", artifact_id, "memory:chn_1")
    with pytest.raises(ArtifactReferenced):
        artifacts.delete(me(), "u-1", artifact_id)
    seen = artifacts.get(me(), "u-1", artifact_id)
    assert (seen.references, seen.referenced_by) == (1, [])  # internal: counted, not named
    assert artifacts.get(top(), "u-1", artifact_id).referenced_by == ["memory:chn_1"]


def test_references_are_named_only_to_a_reader_that_may_read_every_referrer(
    services: Services,
) -> None:
    """Probe 8 (L3): an internal artifact referenced by a pii memory named the memory's
    chain to an internal-ceiling reader (on GET and in the 409 of a delete): the reader
    learnt that a hidden memory exists and points at this artifact. References are
    counted for every reader and named only to a person's token at the top ceiling."""
    from tests.support.artifacts import committed_artifact
    from tests.support.harness import a_write

    artifact_id, _ = committed_artifact(services.artifacts, me(), "u-1", DATA)
    hidden = services.memory.write(
        top(),
        "u-1",
        a_write(
            request_id="pii-ref",
            canonical_key="passport",
            content="Passport scan of Dana, number X1234567",
            sensitivity="pii",
            artifact_id=artifact_id,
        ),
    ).memory
    for reader in (
        me(),
        ctx(
            "acme", "u-1", scopes=EVERYTHING, agent_role="planner", max_sensitivity=Sensitivity.PII
        ),
    ):
        got = services.artifacts.get(reader, "u-1", artifact_id)
        assert (got.references, got.referenced_by) == (1, [])
        with pytest.raises(ArtifactReferenced) as refused:
            services.artifacts.delete(reader, "u-1", artifact_id)
        assert hidden.chain_id not in str(refused.value.to_body())
        assert refused.value.to_body()["error"]["details"]["references"] == 1
    named = services.artifacts.get(top(), "u-1", artifact_id)
    assert named.referenced_by == [f"memory:{hidden.chain_id}"]


def test_deleting_removes_every_object_version(artifacts: ArtifactService) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    artifacts.commit(me(), "u-1", staged.artifact_id)
    put(staged.upload, b"second version")
    job = artifacts.delete(me(), "u-1", staged.artifact_id)
    assert job.status.value == "COMPLETED"
    listing = artifacts.objects.s3.list_object_versions(Bucket="test-artifacts", Prefix="acme/u-1/")
    assert listing.get("Versions", []) == []
    with pytest.raises(NotFound):
        artifacts.get(me(), "u-1", staged.artifact_id)


def test_a_presigned_put_after_the_delete_leaves_nothing_behind(
    artifacts: ArtifactService, clock: FakeClock
) -> None:
    """A presigned PUT cannot be revoked: a client still holding one writes the declared
    bytes again after the artifact's deletion job is COMPLETED. The deleted row stays,
    served to no one, until the last URL issued for it expired; every sweep until then
    removes what arrived under its key, and the last one runs when no URL can write."""
    staged = start(artifacts)
    put(staged.upload, DATA)
    artifacts.commit(me(), "u-1", staged.artifact_id)
    assert artifacts.delete(me(), "u-1", staged.artifact_id).status.value == "COMPLETED"

    def versions() -> list[Any]:
        listing = artifacts.objects.s3.list_object_versions(Bucket="test-artifacts")
        return list(listing.get("Versions", []))

    assert put(staged.upload, DATA) == 200 and len(versions()) == 1  # S3 takes it
    clock.advance(seconds=60)
    artifacts.sweep_staged()
    assert versions() == []
    with pytest.raises(NotFound):
        artifacts.get(me(), "u-1", staged.artifact_id)
    clock.advance(seconds=artifacts.settings.upload_url_seconds + 301)
    artifacts.sweep_staged()
    assert artifacts.store.artifact("acme", "u-1", staged.artifact_id) is None
    assert versions() == []


def test_an_orphaned_staged_upload_is_swept(artifacts: ArtifactService, clock: FakeClock) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)  # uploaded, never committed
    kept = start(artifacts, request_id="up-2")
    put(kept.upload, DATA)
    artifacts.commit(me(), "u-1", kept.artifact_id)
    clock.advance(days=2)
    assert artifacts.sweep_staged() == 1
    with pytest.raises(NotFound):
        artifacts.get(me(), "u-1", staged.artifact_id)
    assert artifacts.get(me(), "u-1", kept.artifact_id).state is ArtifactState.COMMITTED
    keys = [
        v["Key"]
        for v in artifacts.objects.s3.list_object_versions(Bucket="test-artifacts").get(
            "Versions", []
        )
    ]
    assert keys == [f"acme/u-1/{kept.artifact_id}"]


def test_a_tenant_key_refuses_another_tenants_encryption_context(services: Services) -> None:
    alias = services.artifacts.objects.tenant_key("acme")
    kms = boto3.client("kms", region_name="us-east-1")
    blob = kms.encrypt(
        KeyId=alias, Plaintext=b"secret bytes", EncryptionContext={"tenant_id": "acme"}
    )["CiphertextBlob"]
    with pytest.raises(kms.exceptions.InvalidCiphertextException):
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={"tenant_id": "globex"})
    assert (
        kms.decrypt(CiphertextBlob=blob, EncryptionContext={"tenant_id": "acme"})["Plaintext"]
        == b"secret bytes"
    )


def test_a_memory_may_reference_only_a_committed_artifact(services: Services) -> None:
    from memvault_wire.errors import ArtifactNotCommitted
    from tests.support.harness import a_write

    staged = start(services.artifacts)
    with pytest.raises(ArtifactNotCommitted):
        services.memory.write(me(), "u-1", a_write(artifact_id=staged.artifact_id))
    assert services.memory.list_memories(me(), "u-1").items == []


def test_a_shared_artifact_lives_until_its_last_reference_is_deleted(
    services: Services,
) -> None:
    from tests.support.artifacts import committed_artifact
    from tests.support.harness import a_write

    artifact_id, _ = committed_artifact(services.artifacts, me(), "u-1", DATA)
    first = services.memory.write(
        me(), "u-1", a_write(request_id="m1", canonical_key="a", artifact_id=artifact_id)
    ).memory
    second = services.memory.write(
        me(), "u-1", a_write(request_id="m2", canonical_key="b", artifact_id=artifact_id)
    ).memory
    assert services.artifacts.get(me(), "u-1", artifact_id).references == 2

    job = services.memory.delete(me(), "u-1", first.memory_id)
    assert {c.name: c.status.value for c in job.copies}["artifacts"] == "DONE"
    kept = services.artifacts.get(top(), "u-1", artifact_id)
    assert kept.referenced_by == [f"memory:{second.chain_id}"]
    assert requests.get(kept.download.url, timeout=10).content == DATA

    services.memory.delete(me(), "u-1", second.memory_id)
    with pytest.raises(NotFound):
        services.artifacts.get(me(), "u-1", artifact_id)
    listing = services.artifacts.objects.s3.list_object_versions(
        Bucket="test-artifacts", Prefix="acme/"
    )
    assert listing.get("Versions", []) == []


def test_an_upload_window_that_closed_cannot_be_committed_and_is_swept(
    artifacts: ArtifactService, clock: FakeClock
) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    clock.advance(days=2)
    with pytest.raises(UploadIncomplete, match="window"):
        artifacts.commit(me(), "u-1", staged.artifact_id)
    assert artifacts.sweep_staged() == 1


def test_the_sweeper_never_removes_an_artifact_committed_after_its_scan(
    artifacts: ArtifactService, clock: FakeClock
) -> None:
    staged = start(artifacts)
    put(staged.upload, DATA)
    real_listing = artifacts.store.sweepable

    def listed_then_committed(now: Any) -> Any:
        rows = list(real_listing(now))  # sees the row as STAGED and expired...
        artifacts.store.commit(  # ...and the commit lands before the sweeper acts
            "acme", "u-1", staged.artifact_id, version="v1", at=clock.now(), retain_until=None
        )
        return iter(rows)

    clock.advance(days=2)
    artifacts.store.sweepable = listed_then_committed  # type: ignore[method-assign]
    assert artifacts.sweep_staged() == 0
    assert artifacts.objects.s3.list_object_versions(Bucket="test-artifacts").get("Versions")


def test_forgetting_a_subject_deletes_their_artifacts(services: Services) -> None:
    from tests.support.artifacts import committed_artifact

    artifact_id, _ = committed_artifact(services.artifacts, me(), "u-1", DATA)
    job = services.memory.forget(me(), "u-1")
    assert {c.name: c.status.value for c in job.copies}["artifacts"] == "DONE"
    with pytest.raises(NotFound):
        services.artifacts.get(me(), "u-1", artifact_id)
    listing = services.artifacts.objects.s3.list_object_versions(
        Bucket="test-artifacts", Prefix="acme/"
    )
    assert listing.get("Versions", []) == []


def test_a_delete_that_loses_to_a_new_reference_is_409(services: Services) -> None:
    from tests.support.artifacts import committed_artifact
    from tests.support.harness import a_write

    artifact_id, _ = committed_artifact(services.artifacts, me(), "u-1", DATA)
    real_row = services.artifacts._row

    def row_then_reference(*args: Any) -> Any:
        row = real_row(*args)  # read with no references...
        services.memory.write(me(), "u-1", a_write(artifact_id=artifact_id))  # ...then one
        return row

    services.artifacts._row = row_then_reference  # type: ignore[method-assign]
    with pytest.raises(ArtifactReferenced):
        services.artifacts.delete(me(), "u-1", artifact_id)
    services.artifacts._row = real_row  # type: ignore[method-assign]
    assert services.artifacts.get(me(), "u-1", artifact_id).state is ArtifactState.COMMITTED


def test_a_reference_from_a_version_gone_by_ttl_is_still_released(
    services: Services, ddb: Any
) -> None:
    from tests.support.artifacts import committed_artifact
    from tests.support.harness import a_write

    artifact_id, _ = committed_artifact(services.artifacts, me(), "u-1", DATA)
    v1 = services.memory.write(me(), "u-1", a_write(artifact_id=artifact_id)).memory
    v2 = services.memory.write(me(), "u-1", a_write(request_id="r2", content="newer")).memory
    # DynamoDB TTL removed the old version that named the artifact.
    ddb.delete_item(
        TableName="test-memory", Key={"pk": {"S": "acme#u-1"}, "sk": {"S": f"MEM#{v1.memory_id}"}}
    )
    services.memory.delete(me(), "u-1", v2.memory_id)
    with pytest.raises(NotFound):
        services.artifacts.get(me(), "u-1", artifact_id)
