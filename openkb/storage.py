"""Blob store: a local folder by default, S3/MinIO when S3_ENDPOINT is set.

Keys are opaque (``tenant/<id>/<uuid>``); the permission check happens before any read, in
the service that owns the asset row — the store itself knows nothing about who asks.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, Protocol

from openkb.config import Settings
from openkb.errors import NotFound, ServiceUnavailable


class BlobStore(Protocol):
    kind: str

    def put(self, key: str, data: BinaryIO, content_type: str) -> tuple[int, str]: ...
    def open(self, key: str, start: int = 0, length: int | None = None) -> Iterator[bytes]: ...
    def delete(self, key: str) -> None: ...
    def exists(self, key: str) -> bool: ...
    def check(self) -> str: ...
    def has_objects(self, prefix: str = "tenant/") -> bool: ...
    def signed_url(
        self, key: str, expires_s: int = 300, *, content_type: str | None = None, disposition: str | None = None
    ) -> str | None: ...


class LocalBlobStore:
    kind = "local"

    def __init__(self, root: Path) -> None:
        self.root = root

    @staticmethod
    def _checked(key: str) -> str:
        """``key`` if it names a file under the root, else NotFound: every ``/``-separated part
        a plain name (not empty, ``.`` or ``..``), no NUL. Decided on the key's text alone, so
        no path is resolved: resolving (a ``stat`` of every component of the root and the key,
        twice) cost ~40 µs per read, as much as reading a 50 KB image (bench/export.py).
        Keys are written by OpenKB (``tenant/<id>/<uuid>``, or a backup's on restore) and
        files only by ``put``, so nothing under the root is a link out of it."""
        if not key or "\x00" in key:
            raise NotFound("asset not found")
        for part in key.split("/"):
            if part in ("", ".", ".."):
                raise NotFound("asset not found")
        return key

    def _path(self, key: str) -> Path:
        return self.root / self._checked(key)

    def put(self, key: str, data: BinaryIO, content_type: str) -> tuple[int, str]:
        """Written to a temporary file, then renamed: a reader never sees half a blob. A write
        that fails (a full disk, a file-size limit, a read-only mount) removes the temporary
        file and is ``ServiceUnavailable`` naming the cause, as an unreachable S3 is."""
        path = self._path(key)
        h = hashlib.sha256()
        size = 0
        tmp = ""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".upload-")
            with os.fdopen(fd, "wb") as out:
                while chunk := data.read(1 << 20):
                    h.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
            os.replace(tmp, path)
        except BaseException as exc:
            if tmp:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
            if isinstance(exc, OSError):
                raise ServiceUnavailable(f"the blob store cannot write: {exc.strerror or exc}") from None
            raise
        return size, h.hexdigest()

    def open(self, key: str, start: int = 0, length: int | None = None) -> Iterator[bytes]:
        """The blob's bytes in chunks; ``start``/``length``: only that part (an HTTP range)."""
        path = os.path.join(self.root, self._checked(key))  # a str: no Path built per read
        if not os.path.exists(path):
            raise NotFound("asset not found")

        def gen() -> Iterator[bytes]:
            with open(path, "rb") as f:
                if length is None and not start:
                    while chunk := f.read(1 << 16):
                        yield chunk
                    return
                f.seek(start)
                left = length if length is not None else -1
                while left and (chunk := f.read(1 << 16 if left < 0 else min(left, 1 << 16))):
                    left -= len(chunk) if left > 0 else 0
                    yield chunk

        return gen()

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    def exists(self, key: str) -> bool:
        return os.path.isfile(os.path.join(self.root, self._checked(key)))

    def check(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        probe = self.root / ".doctor-probe"
        probe.write_bytes(b"ok")
        probe.unlink()
        usage = shutil.disk_usage(self.root)
        return f"local folder, {usage.free // (1 << 30)} GiB free"

    def signed_url(
        self, key: str, expires_s: int = 300, *, content_type: str | None = None, disposition: str | None = None
    ) -> str | None:
        return None

    def has_objects(self, prefix: str = "tenant/") -> bool:
        """Whether any blob exists under ``prefix`` (a restore refuses a store that is not empty)."""
        base = self.root / prefix
        return base.is_dir() and any(p.is_file() for p in base.rglob("*"))


class S3BlobStore:
    kind = "s3"

    def __init__(self, settings: Settings) -> None:
        import boto3
        from botocore.config import Config

        self.bucket = settings.s3_bucket or ""
        self.client = boto3.client(
            "s3",
            endpoint_url=settings.s3_endpoint,
            aws_access_key_id=settings.s3_access_key,
            aws_secret_access_key=settings.s3_secret_key,
            region_name=settings.s3_region,
            # SigV4 for presigned URLs too: botocore's default for them is the legacy
            # SigV2, which AWS regions opened since 2014 and some S3-compatible stores refuse.
            config=Config(connect_timeout=3, read_timeout=10, retries={"max_attempts": 2}, signature_version="s3v4"),
        )

    def put(self, key: str, data: BinaryIO, content_type: str) -> tuple[int, str]:
        h = hashlib.sha256()
        buf = tempfile.SpooledTemporaryFile(max_size=8 << 20)
        size = 0
        while chunk := data.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
            buf.write(chunk)
        buf.seek(0)
        try:
            self.client.upload_fileobj(buf, self.bucket, key, ExtraArgs={"ContentType": content_type})
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"S3 upload failed ({self.bucket}): {exc}") from None
        return size, h.hexdigest()

    def open(self, key: str, start: int = 0, length: int | None = None) -> Iterator[bytes]:
        extra: dict[str, str] = {}
        if start or length is not None:
            extra["Range"] = f"bytes={start}-{'' if length is None else start + length - 1}"
        try:
            obj = self.client.get_object(Bucket=self.bucket, Key=key, **extra)
        except self.client.exceptions.NoSuchKey:
            raise NotFound("asset not found") from None
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"S3 read failed: {exc}") from None
        return iter(obj["Body"].iter_chunks(1 << 16))

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.bucket, Key=key)

    def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise ServiceUnavailable(f"S3 read failed: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"S3 read failed: {exc}") from None
        return True

    def check(self) -> str:
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"S3 bucket {self.bucket!r} at S3_ENDPOINT is not reachable: {exc}") from None
        return f"bucket {self.bucket}"

    def has_objects(self, prefix: str = "tenant/") -> bool:
        try:
            got = self.client.list_objects_v2(Bucket=self.bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:  # noqa: BLE001
            raise ServiceUnavailable(f"S3 list failed ({self.bucket}): {exc}") from None
        return bool(got.get("KeyCount") or got.get("Contents"))

    def signed_url(
        self, key: str, expires_s: int = 300, *, content_type: str | None = None, disposition: str | None = None
    ) -> str | None:
        """A short-lived GET URL. The trap: the object keeps the Content-Type it was uploaded
        with (an unattached ``text/html`` upload stays ``text/html``), so the URL must carry the
        response overrides the API would have sent (``openkb.assets.disposition``), or the
        redirect serves active content that the proxied path never would."""
        params: dict[str, str] = {"Bucket": self.bucket, "Key": key}
        if content_type:
            params["ResponseContentType"] = content_type
        if disposition:
            params["ResponseContentDisposition"] = disposition
        return str(self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_s))


def blob_store(settings: Settings) -> BlobStore:
    if settings.s3_endpoint:
        return S3BlobStore(settings)
    return LocalBlobStore(settings.openkb_home / "blobs")
