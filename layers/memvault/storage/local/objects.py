"""Objects on local disk, each encrypted under its tenant's key: the local stand-in for
S3 with SSE-KMS, moved by URLs this store signs and its object server serves.

Layout under the data folder::

    master.key                                    32 random bytes, mode 0600
    keys/<tenant>.key                             the tenant's data key, wrapped
    objects/<tenant>/<subject>/<artifact_id>/<version>

(A capital letter in a tenant or subject id is written ``^`` + its lower case, so that
``Acme`` and ``acme`` stay apart on a case-insensitive file system.)

Keys. The master key never encrypts data: HKDF derives from it one key that wraps the
tenant data keys (AES-GCM, the tenant id as associated data, so a key file copied to
another tenant's name does not unwrap) and one that signs URLs. Each tenant has its own
256-bit data key, made on first use; ``destroy_tenant_key`` (what offboarding does with
KMS) replaces it by a tombstone, after which none of the tenant's objects decrypt and
no new one is written. A master key readable by group or others is refused at start.

Objects. Each version is one file: ``MVO1``, a random salt, the plaintext in 64 KiB
chunks, each sealed with AES-GCM under a per-file key (HKDF of the tenant key and the
salt), then a sealed trailer (size, sha256, media type), its length and ``MVOT``.
Every seal carries the encryption context ``{"tenant_id", "artifact_id"}`` and the
version as associated data, and each chunk's nonce its position and whether it is the
last (the STREAM construction): a file moved to another tenant's, artifact's or
version's place, truncated, reordered or altered does not decrypt. Files are written to a
temporary name in the same folder, fsynced and renamed into place, so a reader never sees
half an object.

URLs. ``http://127.0.0.1:<port>/_objects/<token>``: the token carries the method, the
object path (with the version, for a GET), the expiry, the size limit, the sha256 the
body must have and the media type, and an HMAC-SHA256 of all of it; ``verify`` checks it
and ``memvault_local.objects_app`` serves it.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import secrets
import stat
import struct
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import BinaryIO, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from memvault.clock import Clock, SystemClock
from memvault.storage.ports.objects import (
    ObjectHead,
    ObjectMissing,
    ObjectRef,
    ObjectUnreadable,
    SignedRequest,
)

MASTER_KEY_FILE = "master.key"
#: Where the local HTTP server mounts the object server.
OBJECTS_PATH = "/_objects/"

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")
_KEY_MAGIC = b"MVK1"
_KEY_DESTROYED = b"MVK1-DESTROYED\n"
_OBJECT_MAGIC = b"MVO1"
_TRAILER_MAGIC = b"MVOT"
_SALT = 16
_TAG = 16
CHUNK = 64 * 1024
_TRAILER_NONCE = b"\xff" * 11 + b"\x02"


class InsecureMasterKey(RuntimeError):
    """The master key file may be read or written by others than its owner."""


class TenantKeyDestroyed(ObjectUnreadable):
    """The tenant's key was destroyed (offboarding): its objects are gone for good."""


class SignedUrlRefused(Exception):
    """A signed URL that is malformed, altered, expired or used with another method."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UploadRefused(Exception):
    """An upload's body broke its URL's terms; nothing was stored."""

    TOO_LARGE = "payload_too_large"
    CHECKSUM = "checksum_mismatch"

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Readable(Protocol):
    """A body to store: anything with ``read(size)`` (a request's input stream)."""

    def read(self, size: int, /) -> bytes: ...


@dataclass(frozen=True)
class Grant:
    """What a verified URL allows."""

    method: str
    ref: ObjectRef
    #: The pinned version (GET).
    version: str | None
    expires: int
    #: The upload's terms (PUT).
    max_bytes: int | None
    sha256: str | None
    media_type: str | None


def _b64e(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _b64d(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _hkdf(key: bytes, info: bytes, salt: bytes | None = None) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=info).derive(key)


def _component(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError("not a valid id for an object path")
    return re.sub(r"[A-Z]", lambda m: "^" + m.group().lower(), name)


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # not every platform opens directories
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _write_new(path: Path, data: bytes, *, exclusive: bool) -> bool:
    """Write a file atomically (temp file in the same folder, fsync, then link or rename);
    with ``exclusive`` an existing file wins and False is returned."""
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if exclusive:
            try:
                os.link(tmp, path)
            except FileExistsError:
                return False
        else:
            os.replace(tmp, path)
        _fsync_dir(path.parent)
        return True
    finally:
        tmp.unlink(missing_ok=True)


def _read_full(body: Readable, size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left:
        part = body.read(left)
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _nonce(index: int, final: bool) -> bytes:
    return index.to_bytes(11, "big") + (b"\x01" if final else b"\x00")


def _associated(ref: ObjectRef, version: str) -> bytes:
    bound = {**ref.encryption_context(), "version": version}
    return json.dumps(bound, sort_keys=True, separators=(",", ":")).encode()


def load_master_key(data_dir: Path) -> bytes:
    """The master key, created (mode 0600) on first start; refused when others may read
    or write it."""
    path = data_dir / MASTER_KEY_FILE
    if not path.exists():
        _write_new(path, secrets.token_bytes(32), exclusive=True)
    mode = path.stat().st_mode
    if os.name != "nt" and mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise InsecureMasterKey(
            f"{path} is accessible by group or others (mode {stat.filemode(mode)}); it "
            f"guards every local object: run `chmod 600 {path}` and start again"
        )
    key = path.read_bytes()
    if len(key) != 32:
        raise InsecureMasterKey(f"{path} is not a memvault master key (32 bytes)")
    return key


class LocalObjectStore:
    """``base_url`` is the local HTTP server's origin (``http://127.0.0.1:8787``); the
    object server is mounted there at ``/_objects/``."""

    def __init__(self, data_dir: str | Path, base_url: str, clock: Clock | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.base_url = base_url.rstrip("/")
        self.clock = clock or SystemClock()
        self.data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        master = load_master_key(self.data_dir)
        self._wrap = AESGCM(_hkdf(master, b"memvault/local/tenant-key-wrap/v1"))
        self._sign = _hkdf(master, b"memvault/local/object-url/v1")
        self._keys_dir = self.data_dir / "keys"
        self._objects_dir = self.data_dir / "objects"
        for folder in (self._keys_dir, self._objects_dir):
            folder.mkdir(mode=0o700, exist_ok=True)
        self._lock = threading.Lock()
        #: Unwrapped keys by tenant, with the identity of the file they came from: a key
        #: destroyed by another process (``memvault tenant offboard``) is seen at once.
        self._cache: dict[str, tuple[tuple[int, int, int], bytes]] = {}

    # ------------------------------------------------------------------ tenant keys

    def _key_path(self, tenant_id: str) -> Path:
        return self._keys_dir / f"{_component(tenant_id)}.key"

    def _tenant_key(self, tenant_id: str, *, create: bool) -> bytes:
        path = self._key_path(tenant_id)
        with self._lock:
            for _ in range(2):
                try:
                    info = path.stat()
                except FileNotFoundError:
                    if not create:
                        raise ObjectUnreadable("the tenant has no key") from None
                    nonce, key = secrets.token_bytes(12), AESGCM.generate_key(256)
                    sealed = self._wrap.encrypt(nonce, key, self._key_aad(tenant_id))
                    _write_new(path, _KEY_MAGIC + nonce + sealed, exclusive=True)
                    continue  # read back what won (another process may have been first)
                identity = (info.st_dev, info.st_ino, info.st_mtime_ns)
                cached = self._cache.get(tenant_id)
                if cached and cached[0] == identity:
                    return cached[1]
                key = self._unwrap(tenant_id, path.read_bytes())
                self._cache[tenant_id] = (identity, key)
                return key
        raise ObjectUnreadable("the tenant key could not be read")

    @staticmethod
    def _key_aad(tenant_id: str) -> bytes:
        return b"memvault/tenant-key/v1\x00" + tenant_id.encode()

    def _unwrap(self, tenant_id: str, blob: bytes) -> bytes:
        if blob == _KEY_DESTROYED:
            raise TenantKeyDestroyed("the tenant's key was destroyed")
        if not blob.startswith(_KEY_MAGIC) or len(blob) != 4 + 12 + 32 + _TAG:
            raise ObjectUnreadable("the tenant key file is not a memvault key")
        try:
            return self._wrap.decrypt(blob[4:16], blob[16:], self._key_aad(tenant_id))
        except InvalidTag:
            raise ObjectUnreadable("the tenant key does not unwrap under this master key") from None

    def tenant_key(self, tenant_id: str) -> str:
        self._tenant_key(tenant_id, create=True)
        return str(self._key_path(tenant_id))

    def destroy_tenant_key(self, tenant_id: str) -> None:
        """Crypto-shred the tenant: the key becomes a tombstone, every object of theirs is
        unreadable from now on, and none is written any more."""
        path = self._key_path(tenant_id)
        with self._lock:
            _write_new(path, _KEY_DESTROYED, exclusive=False)
            self._cache.pop(tenant_id, None)

    # ------------------------------------------------------------------ signed URLs

    def _signed(self, claims: dict[str, object]) -> str:
        payload = _b64e(json.dumps(claims, sort_keys=True, separators=(",", ":")).encode())
        mac = hmac.new(self._sign, payload.encode(), hashlib.sha256).digest()
        return f"{self.base_url}{OBJECTS_PATH}{payload}.{_b64e(mac)}"

    def _expiry(self, expires_in: int) -> int:
        return int((self.clock.now() + timedelta(seconds=expires_in)).timestamp())

    def upload_url(
        self,
        ref: ObjectRef,
        *,
        media_type: str,
        size_bytes: int,
        sha256: str,
        expires_in: int,
    ) -> SignedRequest:
        self._dir(ref)  # a path that cannot be stored is refused now, not at upload
        claims = {
            "m": "PUT",
            "p": ref.key,
            "e": self._expiry(expires_in),
            "n": size_bytes,
            "h": sha256,
            "c": media_type,
        }
        return SignedRequest("PUT", self._signed(claims), {"Content-Type": media_type})

    def download_url(self, ref: ObjectRef, version: str, *, expires_in: int) -> SignedRequest:
        claims = {"m": "GET", "p": f"{ref.key}/{version}", "e": self._expiry(expires_in)}
        return SignedRequest("GET", self._signed(claims))

    def verify(self, token: str, method: str) -> Grant:
        """The grant of a URL's token, if its signature holds, its method is ``method``
        and it has not expired; ``SignedUrlRefused`` otherwise."""
        payload, _, mac = token.partition(".")
        expected = hmac.new(self._sign, payload.encode(), hashlib.sha256).digest()
        try:
            given = _b64d(mac)
        except ValueError:
            raise SignedUrlRefused("the URL's signature is malformed") from None
        if not mac or not hmac.compare_digest(expected, given):
            raise SignedUrlRefused("the URL's signature does not match")
        claims = json.loads(_b64d(payload))
        if claims["m"] != method:
            raise SignedUrlRefused(f"this URL is for {claims['m']}, not {method}")
        if int(claims["e"]) < int(self.clock.now().timestamp()):
            raise SignedUrlRefused("the URL has expired")
        parts = str(claims["p"]).split("/")
        version = parts.pop() if method == "GET" else None
        tenant_id, subject_id, artifact_id = parts
        return Grant(
            method=method,
            ref=ObjectRef(tenant_id, subject_id, artifact_id),
            version=version,
            expires=int(claims["e"]),
            max_bytes=claims.get("n"),
            sha256=claims.get("h"),
            media_type=claims.get("c"),
        )

    # ------------------------------------------------------------------ objects

    def _dir(self, ref: ObjectRef) -> Path:
        return (
            self._objects_dir
            / _component(ref.tenant_id)
            / _component(ref.subject_id)
            / _component(ref.artifact_id)
        )

    def _versions(self, ref: ObjectRef) -> list[str]:
        try:
            return sorted(p.name for p in self._dir(ref).iterdir() if not p.name.startswith("."))
        except FileNotFoundError:
            return []

    def put(
        self,
        ref: ObjectRef,
        body: Readable,
        *,
        max_bytes: int,
        sha256: str,
        media_type: str | None = None,
    ) -> ObjectHead:
        """Store a new version from a stream: at most ``max_bytes`` bytes whose sha256 is
        ``sha256``, or ``UploadRefused`` and nothing stored."""
        tenant_key = self._tenant_key(ref.tenant_id, create=True)
        folder = self._dir(ref)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        version = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
        salt = secrets.token_bytes(_SALT)
        seal = AESGCM(_hkdf(tenant_key, b"memvault/local/object/v1", salt))
        aad = _associated(ref, version)
        tmp = folder / f".{version}.tmp"
        digest, size, index = hashlib.sha256(), 0, 0
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(_OBJECT_MAGIC + salt)
                chunk = _read_full(body, CHUNK)
                while True:
                    size += len(chunk)
                    if size > max_bytes:
                        raise UploadRefused(
                            UploadRefused.TOO_LARGE, f"the body is over {max_bytes} bytes"
                        )
                    digest.update(chunk)
                    ahead = _read_full(body, CHUNK) if len(chunk) == CHUNK else b""
                    out.write(seal.encrypt(_nonce(index, not ahead), chunk, aad))
                    if not ahead:
                        break
                    chunk, index = ahead, index + 1
                if not hmac.compare_digest(digest.hexdigest(), sha256):
                    raise UploadRefused(
                        UploadRefused.CHECKSUM, "the body's sha256 is not the one signed"
                    )
                meta = {"size": size, "sha256": sha256, "media_type": media_type}
                trailer = seal.encrypt(_TRAILER_NONCE, json.dumps(meta).encode(), aad)
                out.write(trailer + struct.pack(">I", len(trailer)) + _TRAILER_MAGIC)
                out.flush()
                os.fsync(out.fileno())
            os.rename(tmp, folder / version)
            _fsync_dir(folder)
        finally:
            tmp.unlink(missing_ok=True)
        return ObjectHead(version=version, size=size, sha256=sha256)

    def _open(self, ref: ObjectRef, version: str) -> _Opened:
        """Open a version and authenticate its trailer (tenant key, place, version)."""
        path = self._dir(ref) / _component(version)
        try:
            handle: BinaryIO = path.open("rb")
        except FileNotFoundError:
            raise ObjectMissing(ref.key) from None
        try:
            tenant_key = self._tenant_key(ref.tenant_id, create=False)
            start = handle.read(4 + _SALT)
            handle.seek(-8, os.SEEK_END)
            end = handle.tell()
            length, magic = struct.unpack(">I4s", handle.read(8))
            # At least one chunk (an empty body is one empty final chunk) and the trailer.
            if start[:4] != _OBJECT_MAGIC or magic != _TRAILER_MAGIC or length > end - 36:
                raise ObjectUnreadable("not a memvault object file")
            seal = AESGCM(_hkdf(tenant_key, b"memvault/local/object/v1", start[4:]))
            aad = _associated(ref, version)
            handle.seek(end - length)
            meta = json.loads(seal.decrypt(_TRAILER_NONCE, handle.read(length), aad))
            media = meta.get("media_type")
            head = ObjectHead(version, int(meta["size"]), str(meta["sha256"]))
            return _Opened(handle, seal, aad, end - length, head, str(media) if media else None)
        except InvalidTag:
            handle.close()
            raise ObjectUnreadable("the object does not decrypt in this place") from None
        except (OSError, ValueError, KeyError, struct.error):
            handle.close()
            raise ObjectUnreadable("not a memvault object file") from None
        except BaseException:
            handle.close()
            raise

    def head(self, ref: ObjectRef) -> ObjectHead | None:
        versions = self._versions(ref)
        if not versions:
            return None
        opened = self._open(ref, versions[-1])
        opened.handle.close()
        return opened.head

    def read(self, ref: ObjectRef, version: str) -> Iterator[bytes]:
        return self._open(ref, version).plaintext()

    def open_read(
        self, ref: ObjectRef, version: str
    ) -> tuple[ObjectHead, str | None, Iterator[bytes]]:
        """For the object server: the version's head and media type, and its plaintext."""
        opened = self._open(ref, version)
        return opened.head, opened.media_type, opened.plaintext()

    def delete_version(self, ref: ObjectRef, version: str) -> None:
        (self._dir(ref) / _component(version)).unlink(missing_ok=True)

    def delete_all(self, ref: ObjectRef) -> int:
        folder = self._dir(ref)
        removed = 0
        try:
            entries = list(folder.iterdir())
        except FileNotFoundError:
            return 0
        for entry in entries:
            entry.unlink(missing_ok=True)
            removed += not entry.name.startswith(".")
        with contextlib.suppress(OSError):  # an upload arrived meanwhile: it stays
            folder.rmdir()
        return removed


@dataclass
class _Opened:
    handle: BinaryIO
    seal: AESGCM
    aad: bytes
    #: Where the chunks end (the trailer begins).
    end: int
    head: ObjectHead
    media_type: str | None

    def plaintext(self) -> Iterator[bytes]:
        try:
            self.handle.seek(4 + _SALT)
            index, position = 0, 4 + _SALT
            while position < self.end:
                size = min(CHUNK + _TAG, self.end - position)
                final = position + size == self.end
                try:
                    yield self.seal.decrypt(_nonce(index, final), self.handle.read(size), self.aad)
                except InvalidTag:
                    raise ObjectUnreadable("the object was altered") from None
                index, position = index + 1, position + size
        finally:
            self.handle.close()
