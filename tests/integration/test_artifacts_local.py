"""The artifact service over the local adapters: metadata in SQLite, bytes encrypted on
disk, moved by the client through the local object server (werkzeug's test client).

The same rules as on AWS (``test_artifacts.py``): staged upload, commit by size and
sha256, pinned-version download, references, deletion, forgetting, sweeping; and
deleting means gone from the local files too.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from werkzeug.test import Client

from memvault.clock import RandomIds
from memvault.config import Settings
from memvault.models.access import Scope
from memvault.services.artifacts import ArtifactService
from memvault.storage.local.objects import LocalObjectStore
from memvault.storage.ports.memory import ForgetState
from memvault.storage.sqlite.artifacts import SqliteArtifactStore
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault_local.objects_app import ObjectsApp
from memvault_wire.artifact import ArtifactState, StartUpload
from memvault_wire.errors import ArtifactReferenced, NotFound, SecretDetected, UploadIncomplete
from memvault_wire.memory import DeletionJob, Sensitivity
from tests.support.harness import FakeClock, ctx

MARKER = b"LOCAL-PLAINTEXT-MARKER-51c2"
DATA = MARKER + b" a long tool result\n" * 200
EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}
#: Past an upload URL's lifetime, the clock skew the service allows for it.
URL_SLACK = 301


@dataclass
class Jobs:
    recorded: list[DeletionJob] = field(default_factory=list)

    def put_job(self, job: DeletionJob) -> None:
        self.recorded.append(job)

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        return None  # the subject is never forgotten here

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        return ForgetState(epoch=0, forgotten_at=None)  # never forgotten here


@dataclass
class Local:
    service: ArtifactService
    client: Client
    clock: FakeClock
    data_dir: Path
    jobs: Jobs

    #: The object server with no say of the artifact's state, as S3 serves a presigned URL.
    unrevocable: Client

    def send(self, method: str, url: str, data: Any = None, **headers: str) -> Any:
        return self.client.open(urlparse(url).path, method=method, data=data, headers=headers)

    def send_to_s3_like(self, method: str, url: str, data: Any = None, **headers: str) -> Any:
        return self.unrevocable.open(urlparse(url).path, method=method, data=data, headers=headers)

    def start(self, data: bytes = DATA, request_id: str = "up-1") -> Any:
        body = StartUpload(
            request_id=request_id,
            media_type="text/plain",
            size_bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        out, _ = self.service.start(me(), "u-1", body)
        return out

    def upload(self, data: bytes = DATA, request_id: str = "up-1") -> str:
        out = self.start(data, request_id)
        assert self.send("PUT", out.upload.url, data, **out.upload.headers).status_code == 200
        return str(out.artifact_id)

    def files(self) -> list[Path]:
        return [p for p in (self.data_dir / "objects").rglob("*") if p.is_file()]


def me() -> Any:
    return ctx("acme", "u-1", scopes=EVERYTHING)


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    clock = FakeClock()
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    objects = LocalObjectStore(tmp_path, "http://127.0.0.1:8787", clock)
    jobs = Jobs()
    service = ArtifactService(
        SqliteArtifactStore(db), objects, jobs, Settings(), clock, RandomIds()
    )
    # As `memvault run` mounts it: the object server asks the service whether an upload
    # URL's artifact still takes bytes.
    served = Client(ObjectsApp(objects, service))
    yield Local(service, served, clock, tmp_path, jobs, Client(ObjectsApp(objects)))
    db.close()


def test_upload_commit_and_download_the_exact_bytes(local: Local) -> None:
    artifact_id = local.upload()
    committed = local.service.commit(me(), "u-1", artifact_id)
    assert committed.state is ArtifactState.COMMITTED and committed.version
    read = local.service.get(me(), "u-1", artifact_id)
    assert local.send("GET", read.download.url).get_data() == DATA


def test_wrong_bytes_are_refused_at_upload_and_the_commit_waits_for_the_right_ones(
    local: Local,
) -> None:
    out = local.start()
    wrong = local.send("PUT", out.upload.url, DATA[:-1] + b"X", **out.upload.headers)
    assert wrong.status_code == 422
    with pytest.raises(UploadIncomplete):
        local.service.commit(me(), "u-1", out.artifact_id)
    local.send("PUT", out.upload.url, DATA, **out.upload.headers)
    assert local.service.commit(me(), "u-1", out.artifact_id).state is ArtifactState.COMMITTED


def test_a_reupload_after_commit_does_not_change_what_is_read(local: Local) -> None:
    out = local.start()
    local.send("PUT", out.upload.url, DATA, **out.upload.headers)
    pinned = local.service.commit(me(), "u-1", out.artifact_id).version
    # Where a URL cannot be revoked (S3's presigned PUT), it stays valid, but only for the
    # declared bytes; a new version of them does not move the pin either.
    replaced = local.send_to_s3_like("PUT", out.upload.url, b"replaced", **out.upload.headers)
    assert replaced.status_code == 422
    again = local.send_to_s3_like("PUT", out.upload.url, DATA, **out.upload.headers)
    assert again.status_code == 200
    read = local.service.get(me(), "u-1", out.artifact_id)
    assert read.version == pinned
    assert local.send("GET", read.download.url).get_data() == DATA
    assert len(local.files()) == 2


def test_deleting_removes_the_files_the_row_and_records_the_job(local: Local) -> None:
    artifact_id = local.upload()
    local.service.commit(me(), "u-1", artifact_id)
    job = local.service.delete(me(), "u-1", artifact_id)
    assert job.status.value == "COMPLETED" and local.jobs.recorded == [job]
    assert local.files() == []
    with pytest.raises(NotFound):
        local.service.get(me(), "u-1", artifact_id)
    # The row stays DELETED (served to no one) while an upload URL issued for it could
    # still be used, then the sweeper removes it.
    assert local.service.store.artifact("acme", "u-1", artifact_id).state is ArtifactState.DELETED
    local.clock.advance(seconds=Settings().upload_url_seconds + URL_SLACK)
    local.service.sweep_staged()
    assert local.service.store.artifact("acme", "u-1", artifact_id) is None


def test_a_referenced_artifact_lives_until_its_last_reference_goes(local: Local) -> None:
    artifact_id = local.upload()
    local.service.commit(me(), "u-1", artifact_id)
    for ref in ("memory:c1", "run:r1"):
        local.service.store.add_reference("acme", "u-1", artifact_id, ref)
    with pytest.raises(ArtifactReferenced):
        local.service.delete(me(), "u-1", artifact_id)
    assert not local.service.release("acme", "u-1", artifact_id, "memory:c1")
    assert local.files()
    assert local.service.release("acme", "u-1", artifact_id, "run:r1")
    assert local.files() == []
    with pytest.raises(NotFound):
        local.service.get(me(), "u-1", artifact_id)


def test_forgetting_the_subject_removes_every_artifact_and_file(local: Local) -> None:
    first = local.upload()
    local.service.commit(me(), "u-1", first)
    local.service.store.add_reference("acme", "u-1", first, "memory:c1")
    local.upload(b"staged, never committed", request_id="up-2")
    assert local.service.forget_subject("acme", "u-1", local.clock.now()) == 2
    assert local.files() == []
    local.clock.advance(seconds=Settings().upload_url_seconds + URL_SLACK)
    local.service.sweep_staged()
    assert local.service.store.forget_subject("acme", "u-1", local.clock.now()) == []


def test_an_upload_never_committed_is_swept_with_its_file(local: Local) -> None:
    swept = local.upload(request_id="up-1")
    kept = local.upload(request_id="up-2")
    local.service.commit(me(), "u-1", kept)
    local.clock.advance(days=2)
    assert local.service.sweep_staged() == 1
    assert local.service.store.artifact("acme", "u-1", swept) is None
    assert [p.parent.name for p in local.files()] == [kept]


def test_no_local_file_holds_the_plaintext(local: Local) -> None:
    artifact_id = local.upload()
    local.service.commit(me(), "u-1", artifact_id)
    everything = [p for p in local.data_dir.rglob("*") if p.is_file()]
    assert any(p.name == "memvault.db" for p in everything)
    for path in everything:
        assert MARKER not in path.read_bytes(), path


def test_an_upload_url_dies_with_the_commit_and_with_the_artifact(local: Local) -> None:
    """A deleted artifact never comes back on disk: its upload URL, still within its 15
    minutes, is refused once the artifact is committed, and once it is deleted."""
    out = local.start()
    assert local.send("PUT", out.upload.url, DATA, **out.upload.headers).status_code == 200
    local.service.commit(me(), "u-1", out.artifact_id)
    after_commit = local.send("PUT", out.upload.url, DATA, **out.upload.headers)
    assert after_commit.status_code == 403
    assert after_commit.get_json()["error"]["code"] == "forbidden"
    assert len(local.files()) == 1

    job = local.service.delete(me(), "u-1", out.artifact_id)
    assert job.status.value == "COMPLETED"
    after_delete = local.send("PUT", out.upload.url, DATA, **out.upload.headers)
    assert after_delete.status_code == 403
    assert after_delete.get_json()["error"]["code"] == "forbidden"
    assert local.files() == []


def test_bytes_that_land_while_the_artifact_is_deleted_are_removed(local: Local) -> None:
    """The URL was still good when the PUT began; the artifact was deleted while its bytes
    streamed in: they are removed as they land, and the PUT is refused."""
    out = local.start()

    class DeletedMidway(io.RawIOBase):
        def __init__(self) -> None:
            self.body = io.BytesIO(DATA)
            self.deleted = False

        def readable(self) -> bool:
            return True

        def readinto(self, buffer: Any) -> int:
            if not self.deleted:
                self.deleted = True
                local.service.delete(me(), "u-1", out.artifact_id)
            return self.body.readinto(buffer)

    answer = local.send(
        "PUT",
        out.upload.url,
        io.BufferedReader(DeletedMidway()),
        **out.upload.headers,
        **{"Content-Length": str(len(DATA))},
    )
    assert answer.status_code == 403
    assert local.files() == []


def test_bytes_put_through_an_unrevocable_url_after_the_delete_are_purged(local: Local) -> None:
    """Where the object store cannot refuse a signed URL (S3's presigned PUT), the deleted
    artifact's row is kept, served to no one, until every URL issued for it has expired;
    each sweep until then removes whatever arrived under its key."""
    out = local.start()
    local.send_to_s3_like("PUT", out.upload.url, DATA, **out.upload.headers)
    local.service.commit(me(), "u-1", out.artifact_id)
    local.service.delete(me(), "u-1", out.artifact_id)
    assert local.files() == []

    late = local.send_to_s3_like("PUT", out.upload.url, DATA, **out.upload.headers)
    assert late.status_code == 200 and len(local.files()) == 1  # S3 would take it too
    local.clock.advance(seconds=60)
    local.service.sweep_staged()
    assert local.files() == []
    assert local.service.store.artifact("acme", "u-1", out.artifact_id) is not None

    local.clock.advance(seconds=Settings().upload_url_seconds + URL_SLACK)
    expired = local.send_to_s3_like("PUT", out.upload.url, DATA, **out.upload.headers)
    assert expired.status_code == 403
    local.service.sweep_staged()
    assert local.files() == []
    assert local.service.store.artifact("acme", "u-1", out.artifact_id) is None
    with pytest.raises(NotFound):
        local.service.get(me(), "u-1", out.artifact_id)


def test_an_artifact_declared_secret_is_refused_at_its_start(local: Local) -> None:
    """A secret is never stored, as a memory is not: before, the start was accepted and
    the artifact, above every ceiling, was then absent even to its owner's commit."""
    body = StartUpload(
        request_id="up-secret",
        media_type="text/plain",
        size_bytes=len(DATA),
        sha256=hashlib.sha256(DATA).hexdigest(),
        sensitivity=Sensitivity.SECRET,
    )
    with pytest.raises(SecretDetected) as refused:
        local.service.start(me(), "u-1", body)
    assert refused.value.status == 422 and refused.value.code == "secret_detected"
    assert refused.value.details == {"field": "sensitivity"}
    assert local.service.store.receipt("acme", "u-1", "up-secret", local.clock.now()) is None
