"""The local blob store's key check (openkb/storage.py), which every asset read of an export goes
through: decided on the key's text (no path resolved per read), it still keeps every read, write
and delete inside the store's folder."""

from __future__ import annotations

import io
import uuid

import pytest

from openkb.errors import NotFound
from openkb.storage import LocalBlobStore

OUTSIDE = [
    "../secret",
    "tenant/../../secret",
    "tenant/x/../../../secret",
    "/secret",
    "tenant//x",
    "tenant/x/",
    ".",
    "..",
    "",
    "tenant/./x",
    "tenant/x\x00y",
]


@pytest.fixture()
def store(tmp_path):
    (tmp_path / "secret").write_bytes(b"outside the store")
    return LocalBlobStore(tmp_path / "blobs")


def test_a_key_of_plain_names_round_trips(store):
    key = f"tenant/{uuid.uuid4()}/{uuid.uuid4()}"
    assert store.put(key, io.BytesIO(b"x" * 70_000), "image/png")[0] == 70_000
    assert b"".join(store.open(key)) == b"x" * 70_000
    assert store._path(key).is_file() and store._path(key).is_relative_to(store.root)
    store.delete(key)
    with pytest.raises(NotFound):
        store.open(key)


@pytest.mark.parametrize("key", OUTSIDE)
def test_a_key_that_could_leave_the_store_is_not_found(store, key):
    with pytest.raises(NotFound):
        store.open(key)
    with pytest.raises(NotFound):
        store.put(key, io.BytesIO(b"overwritten"), "text/plain")
    with pytest.raises(NotFound):
        store.delete(key)
    assert (store.root.parent / "secret").read_bytes() == b"outside the store"
