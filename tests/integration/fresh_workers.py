"""Two fake LMCache workers on a fresh cluster, as the client and dashboard
tests start from: fixed names (the cluster is the test's own, so their homes
are the same every run), their sockets on two different nodes, 30 and 20
keys, and not synced yet (a fresh cluster asks every worker for a full sync,
LMCache's start-up freeze, which each heartbeat says)."""
from __future__ import annotations

import random

from conftest import unique_ip
from lmcc_worker import FakeWorker
from test_durability import commands, full_sync_command


def two_fresh_workers(first_node, second_node, rng: random.Random) -> list[FakeWorker]:
    a = FakeWorker(first_node, "vllm-a", 0, ip=unique_ip())
    b = FakeWorker(second_node, "vllm-b", 1, ip=unique_ip())
    for w, count in ((a, 30), (b, 20)):
        w.register()
        w.admit([rng.getrandbits(63) for _ in range(count)])
        assert commands(w) == [full_sync_command("controller_restart")]
    return [a, b]
