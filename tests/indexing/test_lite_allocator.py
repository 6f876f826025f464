"""The embedded Milvus Lite runs with glibc allocator settings that keep its memory level under load
(docs/operations.md#supervision)."""

from __future__ import annotations

import os

from openkb.runtime.embedded import LITE_MALLOC


def test_the_embedded_lite_runs_with_the_allocator_settings(milvus_services):
    """``openkb up``'s Lite gets two allocator arenas and a fixed mmap threshold
    (openkb/runtime/embedded.py ``LITE_MALLOC``, docs/operations.md#supervision): without them its
    memory drifted up in every soak. The test session's Lite is started by the same code."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            if b"openkb.runtime.lite_server" not in cmd:
                continue
            env = dict(kv.split(b"=", 1) for kv in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        port = cmd[cmd.index(b"--port") + 1].decode()
        if milvus_services["milvus_uri"].endswith(":" + port):
            found.append(env)
    assert len(found) == 1, "the test session's Lite server was not found"
    for k, v in LITE_MALLOC.items():
        assert found[0].get(k.encode()) == v.encode(), k
