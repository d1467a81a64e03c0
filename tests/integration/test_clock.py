"""Clock jumps (issue 13): one node's wall clock steps (an NTP step, a VM
restored; here POST /admin/faults {"clock_jump_ms": N} with --fault-injection
on). Each node measures its peers' clock offsets from the wall time their
greetings carry (/cluster/status `clock_offset_ms`), so a request forwarded to a
worker's home carries its deadline in the home's clock and is neither refused
as expired nor applied late; and the reaper counts a worker's silence on the
monotonic clock, so a jump reaps nobody.

Ground truth is the twins' own registrations; every wait polls a condition."""

from __future__ import annotations

import random

from conftest import unique, wait_until
from lmcc_cluster import Cluster, SpreadNode
from lmcc_worker import FakeWorker
from test_cluster import Twin, reference, settle  # noqa: F401

JUMP_MS = 600_000  # twice the worker timeout below


def offsets_seen_by(node) -> dict[str, int]:
    return {m["id"]: m["clock_offset_ms"] for m in node.get("/cluster/status").json()["members"]}


def registered(node) -> set[tuple[str, int]]:
    return {(w["instance_id"], w["worker_id"]) for w in node.workers()}


def test_clock_jumps_refuse_no_forwarded_request_and_reap_no_worker(tmp_path, reference):
    cluster = Cluster(tmp_path / "cluster",
                      extra=("--fault-injection", "on", "--health-check-interval", "1",
                             "--lmcache-worker-timeout", str(JUMP_MS // 2000))).start()
    rng = random.Random(13)
    tag = unique("clock")
    twins = [Twin(cluster, reference, rng, f"{tag}-{i}", w) for i in range(3) for w in range(2)]
    try:
        for t in twins:
            t.register()
        settle(twins, SpreadNode(cluster), reference)  # every twin has heartbeated
        everyone = {(t.c.instance_id, t.c.worker_id) for t in twins}
        n1, n2, n3 = cluster.nodes
        passes = n2.event_count("reaper_passes")
        assert n2.post("/admin/faults", {"clock_jump_ms": JUMP_MS}).json()["clock_offset_ms"] == JUMP_MS
        assert n3.post("/admin/faults", {"clock_jump_ms": -JUMP_MS}).status == 200

        def measured() -> bool:
            seen = offsets_seen_by(n1)
            return abs(seen["n2"] - JUMP_MS) < 5_000 and abs(seen["n3"] + JUMP_MS) < 5_000

        # n3's step back counts once n1's window of 16 greetings passed it:
        # 16 s at the quiet cluster's one greeting a second.
        wait_until(measured, timeout=25, message="n1 measured both jumped clocks")
        wait_until(lambda: abs(offsets_seen_by(n2)["n3"] + 2 * JUMP_MS) < 5_000,
                   message="n2 measured n3's clock")
        # n2's reaper ran since its clock went ten minutes ahead: it reaped
        # nobody (the twins heartbeated a moment before).
        wait_until(lambda: n2.event_count("reaper_passes") >= passes + 2,
                   message="n2's reaper ran since the jump")
        for node in cluster.nodes:
            assert registered(node) == everyone, node

        # Every worker registers and heartbeats again through every node: each
        # request goes to the worker's home, whichever clock it has.
        for node in cluster.nodes:
            for t in twins:
                w = FakeWorker(node, t.c.instance_id, t.c.worker_id, ip=t.c.ip, control=False)
                try:
                    assert w.register()["type"] == "RegisterRetMsg"
                    assert w.heartbeat()["type"] == "HeartbeatRetMsg"
                finally:
                    w.close()
        for node in cluster.nodes:
            assert registered(node) == everyone, node
            assert node.event_count("forwarded_request_expired") == 0
    finally:
        for t in twins:
            t.close()
        cluster.stop()
