"""The object store's port: an artifact's bytes, encrypted under its tenant's key.

Clients move the bytes themselves, through short-lived signed URLs the store issues
(presigned S3 URLs on AWS; locally, URLs signed by the local store and served by its
object server); the service only issues URLs, looks at what arrived and deletes. Every
object is addressed by (tenant, subject, artifact) and encrypted under the tenant's key
with the encryption context ``{"tenant_id", "artifact_id"}``: bytes moved to another
tenant's or artifact's place do not decrypt. Each upload makes a new version; a commit
pins one and downloads serve exactly that one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class ObjectRef:
    tenant_id: str
    subject_id: str
    artifact_id: str

    @property
    def key(self) -> str:
        """``<tenant>/<subject>/<artifact_id>``: the tenant leads every object key."""
        return f"{self.tenant_id}/{self.subject_id}/{self.artifact_id}"

    def encryption_context(self) -> dict[str, str]:
        return {"tenant_id": self.tenant_id, "artifact_id": self.artifact_id}


@dataclass(frozen=True)
class SignedRequest:
    """What a client sends to move bytes: the method, the URL and the headers it must
    carry (the URL is valid only with them)."""

    method: str
    url: str
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ObjectHead:
    """One stored version of an object."""

    version: str
    size: int
    #: The sha256 (hex) the store itself verified for these bytes when they arrived, or
    #: ``None`` when it did not (the caller then hashes them: moto, unlike S3, checks no
    #: ``x-amz-checksum-sha256``).
    sha256: str | None = None


class ObjectMissing(LookupError):
    """The object (or that version of it) is not stored."""


class ObjectUnreadable(Exception):
    """The stored bytes do not decrypt: moved to another tenant's or artifact's place,
    altered, or their tenant's key was destroyed."""


class ObjectStore(Protocol):
    def upload_url(
        self,
        ref: ObjectRef,
        *,
        media_type: str,
        size_bytes: int,
        sha256: str,
        expires_in: int,
    ) -> SignedRequest:
        """A PUT of at most ``size_bytes`` bytes whose sha256 (hex) must be ``sha256``,
        valid for ``expires_in`` seconds; each PUT stores a new version."""
        ...

    def head(self, ref: ObjectRef) -> ObjectHead | None:
        """The latest version, or ``None`` when nothing has arrived."""
        ...

    def read(self, ref: ObjectRef, version: str) -> Iterator[bytes]:
        """The plaintext of one version, in chunks. Raises ``ObjectMissing`` or
        ``ObjectUnreadable``."""
        ...

    def download_url(self, ref: ObjectRef, version: str, *, expires_in: int) -> SignedRequest:
        """A GET of exactly ``version``, valid for ``expires_in`` seconds."""
        ...

    def delete_version(self, ref: ObjectRef, version: str) -> None:
        """Remove one version (idempotent)."""
        ...

    def delete_all(self, ref: ObjectRef) -> int:
        """Remove every version (and delete marker) of the object; returns how many."""
        ...

    def tenant_key(self, tenant_id: str) -> str:
        """The name of the key that encrypts the tenant's objects (a KMS alias, the local
        key's file), created on first use where the store creates keys."""
        ...
