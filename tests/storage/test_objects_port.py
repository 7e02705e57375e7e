"""The object store's contract, against both adapters: S3 with SSE-KMS (moto) and the
local store (AES-GCM files under per-tenant keys wrapped by a master key).

Clients move bytes through the signed URLs themselves: requests against moto's S3, and
werkzeug's test client against the local object server. moto checks no
``x-amz-checksum-sha256``, expires no presigned URL and lets S3 accept any encryption
context, so for S3 the URL terms are checked in the signed URL and the context binding
against KMS; the local store enforces all of them itself, which is tested through its
server.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import boto3
import pytest
import requests
from botocore.config import Config
from moto import mock_aws
from werkzeug.test import Client

from memvault.storage.local.objects import (
    CHUNK,
    InsecureMasterKey,
    LocalObjectStore,
    TenantKeyDestroyed,
    UploadRefused,
)
from memvault.storage.ports.objects import (
    ObjectMissing,
    ObjectRef,
    ObjectStore,
    ObjectUnreadable,
    SignedRequest,
)
from memvault.storage.s3.objects import S3ObjectStore
from memvault_local.keys import LocalTenantKeys, ensure_bucket
from memvault_local.objects_app import ObjectsApp
from tests.support.harness import FakeClock

MARKER = b"PLAINTEXT-MARKER-7f3a9c"
DATA = MARKER + b" tool output, every row reconciled\n" * 50
REF = ObjectRef("acme", "u-1", "art_" + "a" * 32)
BUCKET = "objects-test"


@dataclass
class Rig:
    kind: str
    store: ObjectStore
    clock: FakeClock
    data_dir: Path | None = None

    def send(self, signed: SignedRequest, data: bytes | None = None) -> tuple[int, bytes]:
        if self.kind == "s3":
            answer = requests.request(
                signed.method, signed.url, data=data, headers=dict(signed.headers), timeout=10
            )
            return answer.status_code, answer.content
        assert isinstance(self.store, LocalObjectStore)
        client = Client(ObjectsApp(self.store))
        path = urlparse(signed.url).path
        reply = client.open(path, method=signed.method, data=data, headers=dict(signed.headers))
        return reply.status_code, reply.get_data()

    def upload(self, data: bytes, ref: ObjectRef = REF, **terms: Any) -> int:
        signed = self.store.upload_url(
            ref,
            media_type="text/plain",
            size_bytes=terms.pop("size_bytes", len(data)),
            sha256=terms.pop("sha256", hashlib.sha256(data).hexdigest()),
            expires_in=terms.pop("expires_in", 900),
        )
        return self.send(signed, data)[0]


def local_rig(tmp_path: Path) -> Rig:
    clock = FakeClock()
    data_dir = tmp_path / "data"
    return Rig("local", LocalObjectStore(data_dir, "http://127.0.0.1:8787", clock), clock, data_dir)


@pytest.fixture(params=["s3", "local"])
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "local":
        yield local_rig(tmp_path)
        return
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        ensure_bucket(s3, BUCKET)
        keys = LocalTenantKeys(boto3.client("kms", region_name="us-east-1"), "alias/memvault/")
        yield Rig("s3", S3ObjectStore(s3, BUCKET, keys), FakeClock())


@pytest.fixture
def local(tmp_path: Path) -> Rig:
    return local_rig(tmp_path)


def read(store: ObjectStore, ref: ObjectRef, version: str) -> bytes:
    return b"".join(store.read(ref, version))


# ----------------------------------------------------------------------------- both adapters


def test_bytes_put_through_the_upload_url_read_back_by_version(rig: Rig) -> None:
    assert rig.store.head(REF) is None
    assert rig.upload(DATA) == 200

    head = rig.store.head(REF)
    assert head is not None and head.size == len(DATA)
    assert head.sha256 in (None, hashlib.sha256(DATA).hexdigest())
    assert read(rig.store, REF, head.version) == DATA
    status, body = rig.send(rig.store.download_url(REF, head.version, expires_in=300))
    assert (status, body) == (200, DATA)


def test_a_large_object_round_trips_across_chunks(rig: Rig) -> None:
    data = os.urandom(3 * CHUNK + 123)
    assert rig.upload(data) == 200
    head = rig.store.head(REF)
    assert head is not None
    assert read(rig.store, REF, head.version) == data


def test_each_upload_is_a_new_version_and_a_pinned_download_keeps_serving_its_own(
    rig: Rig,
) -> None:
    rig.upload(DATA)
    first = rig.store.head(REF)
    assert first is not None
    rig.upload(b"replaced behind our back")
    latest = rig.store.head(REF)
    assert latest is not None and latest.version != first.version
    assert latest.size == len(b"replaced behind our back")
    status, body = rig.send(rig.store.download_url(REF, first.version, expires_in=300))
    assert (status, body) == (200, DATA)


def test_deleting_one_version_leaves_the_others(rig: Rig) -> None:
    rig.upload(DATA)
    first = rig.store.head(REF)
    rig.upload(b"second")
    second = rig.store.head(REF)
    assert first is not None and second is not None
    rig.store.delete_version(REF, second.version)
    rig.store.delete_version(REF, second.version)  # idempotent
    head = rig.store.head(REF)
    assert head is not None and head.version == first.version
    with pytest.raises(ObjectMissing):
        read(rig.store, REF, second.version)


def test_deleting_all_versions_leaves_nothing(rig: Rig) -> None:
    rig.upload(DATA)
    rig.upload(b"second")
    assert rig.store.delete_all(REF) == 2
    assert rig.store.head(REF) is None
    assert rig.store.delete_all(REF) == 0


def test_deleting_an_object_leaves_objects_whose_key_it_prefixes(rig: Rig) -> None:
    longer = ObjectRef(REF.tenant_id, REF.subject_id, REF.artifact_id + "0")
    rig.upload(DATA)
    rig.upload(DATA, longer)
    rig.store.delete_all(REF)
    assert rig.store.head(longer) is not None


def test_another_tenants_or_subjects_place_holds_nothing(rig: Rig) -> None:
    rig.upload(DATA)
    for other in (
        ObjectRef("globex", REF.subject_id, REF.artifact_id),
        ObjectRef(REF.tenant_id, "u-2", REF.artifact_id),
    ):
        assert rig.store.head(other) is None


def test_each_tenant_has_its_own_key(rig: Rig) -> None:
    acme, globex = rig.store.tenant_key("acme"), rig.store.tenant_key("globex")
    assert acme != globex and "acme" in acme
    assert rig.store.tenant_key("acme") == acme


# ----------------------------------------------------------------------------- S3 with KMS


@pytest.fixture
def s3_rig(tmp_path: Path) -> Iterator[Rig]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
        ensure_bucket(s3, BUCKET)
        keys = LocalTenantKeys(boto3.client("kms", region_name="us-east-1"), "alias/memvault/")
        yield Rig("s3", S3ObjectStore(s3, BUCKET, keys), FakeClock())


def test_s3_uploads_are_signed_for_the_tenants_key_context_and_digest(s3_rig: Rig) -> None:
    store = s3_rig.store
    assert isinstance(store, S3ObjectStore)
    signed = store.upload_url(
        REF,
        media_type="text/plain",
        size_bytes=len(DATA),
        sha256=hashlib.sha256(DATA).hexdigest(),
        expires_in=600,
    )
    query = parse_qs(urlparse(signed.url).query)
    assert int(query["X-Amz-Expires"][0]) == 600
    signed_headers = query["X-Amz-SignedHeaders"][0].split(";")
    for header in (
        "x-amz-server-side-encryption-aws-kms-key-id",
        "x-amz-server-side-encryption-context",
        "x-amz-server-side-encryption-bucket-key-enabled",
        "x-amz-checksum-sha256",
    ):
        assert header in signed_headers
    # No S3 Bucket Key: its data key would carry only the bucket ARN as encryption
    # context, which the tenant's key refuses (tests/infrastructure/test_policy_simulation).
    assert signed.headers["x-amz-server-side-encryption-bucket-key-enabled"] == "false"
    context = json.loads(base64.b64decode(signed.headers["x-amz-server-side-encryption-context"]))
    assert context == {"tenant_id": "acme", "artifact_id": REF.artifact_id}
    assert (
        base64.b64decode(signed.headers["x-amz-checksum-sha256"]) == hashlib.sha256(DATA).digest()
    )

    assert s3_rig.send(signed, DATA)[0] == 200
    head = store.s3.head_object(Bucket=BUCKET, Key=REF.key)
    assert head["ServerSideEncryption"] == "aws:kms"
    assert head["SSEKMSKeyId"].endswith("alias/memvault/acme")


def test_s3_downloads_are_short_lived_and_pinned(s3_rig: Rig) -> None:
    s3_rig.upload(DATA)
    head = s3_rig.store.head(REF)
    assert head is not None
    url = s3_rig.store.download_url(REF, head.version, expires_in=120).url
    query = parse_qs(urlparse(url).query)
    assert int(query["X-Amz-Expires"][0]) == 120
    assert query["versionId"] == [head.version]


def test_s3_reports_no_digest_it_did_not_verify(s3_rig: Rig) -> None:
    s3_rig.upload(DATA[:-1] + b"X", sha256=hashlib.sha256(DATA).hexdigest())  # moto takes it
    head = s3_rig.store.head(REF)
    assert head is not None and head.sha256 is None  # the caller hashes the bytes itself


def test_a_kms_tenant_key_decrypts_only_under_its_own_encryption_context(s3_rig: Rig) -> None:
    alias = s3_rig.store.tenant_key("acme")
    kms = boto3.client("kms", region_name="us-east-1")
    context = REF.encryption_context()
    blob = kms.encrypt(KeyId=alias, Plaintext=MARKER, EncryptionContext=context)["CiphertextBlob"]
    for wrong in ({**context, "tenant_id": "globex"}, {**context, "artifact_id": "art_other"}):
        with pytest.raises(kms.exceptions.InvalidCiphertextException):
            kms.decrypt(CiphertextBlob=blob, EncryptionContext=wrong)
    assert kms.decrypt(CiphertextBlob=blob, EncryptionContext=context)["Plaintext"] == MARKER


# ----------------------------------------------------------------------------- local: files


def object_files(rig: Rig, ref: ObjectRef = REF) -> list[Path]:
    assert rig.data_dir is not None
    folder = rig.data_dir / "objects" / ref.tenant_id / ref.subject_id / ref.artifact_id
    return sorted(folder.iterdir())


def test_the_plaintext_is_in_no_byte_of_any_local_file(local: Rig) -> None:
    assert local.data_dir is not None
    local.upload(DATA)
    local.upload(DATA + b"again")
    local.upload(DATA, ObjectRef("globex", "u-9", REF.artifact_id))
    local.upload(DATA, size_bytes=10)  # refused: over its limit
    files = [p for p in local.data_dir.rglob("*") if p.is_file()]
    assert len(files) >= 6  # master key, two tenant keys, three objects
    for path in files:
        assert MARKER not in path.read_bytes(), path
        assert MARKER.hex().encode() not in path.read_bytes(), path


def test_local_objects_live_under_tenant_subject_artifact_version(local: Rig) -> None:
    local.upload(DATA)
    head = local.store.head(REF)
    assert head is not None
    assert [p.name for p in object_files(local)] == [head.version]
    assert object_files(local)[0].stat().st_mode & 0o077 == 0


@pytest.mark.parametrize(
    "elsewhere",
    [
        ObjectRef("globex", "u-1", REF.artifact_id),
        ObjectRef("acme", "u-1", "art_" + "b" * 32),
    ],
    ids=["other-tenant", "other-artifact"],
)
def test_a_local_file_moved_to_another_place_does_not_decrypt(
    local: Rig, elsewhere: ObjectRef
) -> None:
    local.upload(b"x", elsewhere)  # the other place exists, with its tenant's key
    local.upload(DATA)  # later: the moved file becomes the latest version there
    (source,) = object_files(local)
    target = object_files(local, elsewhere)[0].parent / source.name
    os.replace(source, target)
    with pytest.raises(ObjectUnreadable):
        read(local.store, elsewhere, source.name)
    with pytest.raises(ObjectUnreadable):
        local.store.head(elsewhere)


def test_a_local_file_moved_to_another_version_does_not_decrypt(local: Rig) -> None:
    local.upload(DATA)
    local.upload(b"second")
    first, second = object_files(local)
    os.replace(first, second)  # the old bytes now stand where the new version was
    with pytest.raises(ObjectUnreadable):
        read(local.store, REF, second.name)


@pytest.mark.parametrize("damage", ["flip", "truncate", "drop-last-chunk"])
def test_an_altered_local_file_does_not_decrypt(local: Rig, damage: str) -> None:
    data = os.urandom(2 * CHUNK + 10)
    local.upload(data)
    (path,) = object_files(local)
    raw = bytearray(path.read_bytes())
    trailer = raw[-8:]
    trailer_len = int.from_bytes(trailer[:4], "big")
    chunks_end = len(raw) - 8 - trailer_len
    if damage == "flip":
        raw[40] ^= 0x01
    elif damage == "truncate":
        raw = raw[: chunks_end - 5] + raw[chunks_end:]
    else:  # drop the final chunk: the one before it was not sealed as the last
        last = (chunks_end - 20) % (CHUNK + 16) or (CHUNK + 16)
        raw = raw[: chunks_end - last] + raw[chunks_end:]
    path.write_bytes(bytes(raw))
    with pytest.raises(ObjectUnreadable):
        read(local.store, REF, path.name)


def test_a_destroyed_tenant_key_leaves_its_objects_unreadable(local: Rig) -> None:
    store = local.store
    assert isinstance(store, LocalObjectStore)
    local.upload(DATA)
    other = ObjectRef("globex", "u-1", REF.artifact_id)
    local.upload(DATA, other)
    head = store.head(REF)
    assert head is not None
    download = store.download_url(REF, head.version, expires_in=300)

    store.destroy_tenant_key("acme")

    with pytest.raises(TenantKeyDestroyed):
        read(store, REF, head.version)
    assert local.send(download)[0] == 403
    assert local.upload(b"new bytes for an offboarded tenant") == 403
    # Another process's store (the local server) sees the destruction too.
    assert local.data_dir is not None
    fresh = LocalObjectStore(local.data_dir, "http://127.0.0.1:8787", local.clock)
    with pytest.raises(TenantKeyDestroyed):
        read(fresh, REF, head.version)
    other_head = store.head(other)
    assert other_head is not None and read(store, other, other_head.version) == DATA


def test_a_tenant_key_file_copied_to_another_tenant_does_not_unwrap(local: Rig) -> None:
    assert local.data_dir is not None
    local.store.tenant_key("acme")
    keys = local.data_dir / "keys"
    (keys / "globex.key").write_bytes((keys / "acme.key").read_bytes())
    with pytest.raises(ObjectUnreadable):
        local.store.tenant_key("globex")
    assert local.upload(DATA, ObjectRef("globex", "u-1", REF.artifact_id)) == 403
    assert local.upload(DATA) == 200


def test_tenant_ids_that_differ_in_case_stay_apart(local: Rig) -> None:
    upper = ObjectRef("Acme", REF.subject_id, REF.artifact_id)
    local.upload(DATA)
    local.upload(b"other tenant", upper)
    assert local.store.tenant_key("Acme") != local.store.tenant_key("acme")
    head = local.store.head(upper)
    assert head is not None and read(local.store, upper, head.version) == b"other tenant"
    assert local.store.delete_all(upper) == 1
    assert local.store.head(REF) is not None


def test_concurrent_first_uses_of_a_tenant_share_one_key(tmp_path: Path) -> None:
    """Several stores (as several processes would) race to create the tenant's key;
    exactly one key results and every object written under it reads back."""
    clock = FakeClock()
    stores = [LocalObjectStore(tmp_path, "http://127.0.0.1:1", clock) for _ in range(6)]
    barrier = threading.Barrier(len(stores))
    written: list[tuple[ObjectRef, str, bytes]] = []
    lock = threading.Lock()

    def first_use(n: int) -> None:
        ref = ObjectRef("acme", "u-1", f"art_{n:032x}")
        data = f"{n}".encode() * 100
        barrier.wait()
        head = stores[n].put(
            ref, _Body(data), max_bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
        )
        with lock:
            written.append((ref, head.version, data))

    threads = [threading.Thread(target=first_use, args=(n,)) for n in range(len(stores))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(written) == len(stores)
    reader = LocalObjectStore(tmp_path, "http://127.0.0.1:1", clock)
    for ref, version, data in written:
        assert read(reader, ref, version) == data
    assert [p.name for p in (tmp_path / "keys").iterdir()] == ["acme.key"]


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, size: int = -1) -> bytes:
        chunk, self.data = self.data[:size], self.data[size:]
        return chunk


# ----------------------------------------------------------------------------- local: master key


def test_the_master_key_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    LocalObjectStore(tmp_path / "d", "http://127.0.0.1:1")
    key = tmp_path / "d" / "master.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == 32
    before = key.read_bytes()
    LocalObjectStore(tmp_path / "d", "http://127.0.0.1:1")  # a restart keeps it
    assert key.read_bytes() == before


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_master_key_others_may_read_is_refused_at_start(tmp_path: Path, mode: int) -> None:
    LocalObjectStore(tmp_path, "http://127.0.0.1:1")
    (tmp_path / "master.key").chmod(mode)
    with pytest.raises(InsecureMasterKey, match="chmod 600"):
        LocalObjectStore(tmp_path, "http://127.0.0.1:1")


def test_objects_do_not_decrypt_under_another_master_key(local: Rig) -> None:
    assert local.data_dir is not None
    local.upload(DATA)
    head = local.store.head(REF)
    assert head is not None
    (local.data_dir / "master.key").write_bytes(os.urandom(32))
    fresh = LocalObjectStore(local.data_dir, "http://127.0.0.1:8787", local.clock)
    with pytest.raises(ObjectUnreadable):
        read(fresh, REF, head.version)


# ----------------------------------------------------------------------------- local: signed URLs


def upload_url(local: Rig, data: bytes = DATA, **terms: Any) -> SignedRequest:
    return local.store.upload_url(
        REF,
        media_type="text/plain",
        size_bytes=terms.get("size_bytes", len(data)),
        sha256=terms.get("sha256", hashlib.sha256(data).hexdigest()),
        expires_in=terms.get("expires_in", 900),
    )


def test_a_body_over_the_signed_size_is_refused_and_nothing_stored(local: Rig) -> None:
    signed = upload_url(local, size_bytes=len(DATA) - 1)
    status, body = local.send(signed, DATA)
    assert status == 413 and json.loads(body)["error"]["code"] == "payload_too_large"
    assert local.store.head(REF) is None
    assert object_files_or_none(local) == []


def test_a_body_streamed_past_the_limit_is_cut_off_and_nothing_stored(local: Rig) -> None:
    """No Content-Length to refuse early by: the store counts as the bytes stream in."""
    store = local.store
    assert isinstance(store, LocalObjectStore)

    class Endless:
        read_so_far = 0

        def read(self, size: int = -1) -> bytes:
            self.read_so_far += size
            return b"\x00" * size

    body = Endless()
    with pytest.raises(UploadRefused) as refused:
        store.put(REF, body, max_bytes=CHUNK + 1, sha256="0" * 64)
    assert refused.value.code == UploadRefused.TOO_LARGE
    assert body.read_so_far <= 3 * CHUNK
    assert store.head(REF) is None
    assert object_files_or_none(local) == []


def test_a_body_with_another_sha256_is_refused_and_nothing_stored(local: Rig) -> None:
    signed = upload_url(local)
    status, body = local.send(signed, DATA[:-1] + b"X")
    assert status == 422 and json.loads(body)["error"]["code"] == "checksum_mismatch"
    assert local.store.head(REF) is None
    assert object_files_or_none(local) == []


def test_an_expired_url_is_refused(local: Rig) -> None:
    signed = upload_url(local, expires_in=60)
    local.clock.advance(seconds=61)
    assert local.send(signed, DATA)[0] == 403
    local.clock.advance(seconds=-61)
    assert local.send(signed, DATA)[0] == 200
    head = local.store.head(REF)
    assert head is not None
    download = local.store.download_url(REF, head.version, expires_in=300)
    assert local.send(download)[0] == 200
    local.clock.advance(seconds=301)
    assert local.send(download)[0] == 403


def token_of(signed: SignedRequest) -> str:
    return urlparse(signed.url).path.rsplit("/", 1)[-1]


def with_token(signed: SignedRequest, token: str) -> SignedRequest:
    base = signed.url.rsplit("/", 1)[0]
    return SignedRequest(signed.method, f"{base}/{token}", signed.headers)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _claims(token: str) -> Any:
    payload = token.split(".")[0]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


@pytest.mark.parametrize(
    "tamper",
    [
        {"n": 10**9},  # a bigger size limit
        {"p": "globex/u-1/" + REF.artifact_id},  # another tenant's place
        {"e": 4_000_000_000},  # a later expiry
        {"h": "0" * 64},  # another digest
    ],
    ids=["size", "path", "expiry", "sha256"],
)
def test_a_tampered_url_is_refused(local: Rig, tamper: dict[str, Any]) -> None:
    signed = upload_url(local)
    payload, mac = token_of(signed).split(".")
    claims = {**_claims(payload), **tamper}
    forged = _b64(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
    status, body = local.send(with_token(signed, f"{forged}.{mac}"), DATA)
    assert status == 403 and json.loads(body)["error"]["code"] == "forbidden"
    assert local.store.head(REF) is None
    assert local.store.head(ObjectRef("globex", "u-1", REF.artifact_id)) is None


@pytest.mark.parametrize("token", ["", "garbage", "a.b", "a.", ".a"])
def test_a_malformed_token_is_refused(local: Rig, token: str) -> None:
    signed = upload_url(local)
    assert local.send(with_token(signed, token), DATA)[0] == 403


def test_a_url_is_good_for_its_own_method_only(local: Rig) -> None:
    signed = upload_url(local)
    as_get = SignedRequest("GET", signed.url)
    assert local.send(as_get)[0] == 403
    local.send(signed, DATA)
    head = local.store.head(REF)
    assert head is not None
    download = local.store.download_url(REF, head.version, expires_in=300)
    assert local.send(SignedRequest("PUT", download.url), b"overwrite")[0] == 403
    assert local.send(SignedRequest("DELETE", download.url))[0] == 405


def test_a_url_signed_by_another_data_folder_is_refused(local: Rig, tmp_path: Path) -> None:
    other = LocalObjectStore(tmp_path / "elsewhere", "http://127.0.0.1:8787", local.clock)
    signed = other.upload_url(
        REF,
        media_type="text/plain",
        size_bytes=len(DATA),
        sha256=hashlib.sha256(DATA).hexdigest(),
        expires_in=900,
    )
    assert local.send(signed, DATA)[0] == 403


def test_the_download_serves_the_media_type_and_length(local: Rig) -> None:
    local.upload(DATA)
    head = local.store.head(REF)
    assert head is not None
    signed = local.store.download_url(REF, head.version, expires_in=300)
    assert signed.url.startswith("http://127.0.0.1:8787/_objects/")
    reply = Client(ObjectsApp(local.store)).get(urlparse(signed.url).path)
    assert reply.status_code == 200
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert int(reply.headers["Content-Length"]) == len(DATA)
    assert reply.headers["x-amz-version-id"] == head.version


def object_files_or_none(local: Rig) -> list[Path]:
    try:
        return object_files(local)
    except FileNotFoundError:
        return []
