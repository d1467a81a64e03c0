"""The chaos checker's placement (availability.Ring) against a running
cluster's own answers: three members and a standby on the ring. Every node
reports how many slots it holds as primary and replica, and counts the
entries of its primary slots in kv_pool_keys_count (docs/cluster.md,
"Metrics"); the harness must predict both, before and after the standby
joins, for keys that include negative ones (Python's chunk hashes are
signed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "integration"))
sys.path.insert(0, str(HERE))
from availability import Ring, slot_of  # noqa: E402
from conftest import unique_ip, wait_until  # noqa: E402
from lmcc_cluster import Cluster  # noqa: E402
from lmcc_worker import FakeWorker, chunk_hashes  # noqa: E402
from test_durability import settle_fresh_node  # noqa: E402


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path / "cluster", n=4, standby=frozenset({"n4"})).start()
    yield c
    c.stop()


def primary_counts(ring: Ring, keys: list[int], members: list[str]) -> dict[str, int]:
    out = {m: 0 for m in members}
    for k in keys:
        out[ring.owners(slot_of(k, ring.slots), members)[0]] += 1
    return out


def agrees(cluster: Cluster, ring: Ring, keys: list[int], members: list[str]) -> bool:
    want_slots = ring.slot_counts(members)
    want_keys = primary_counts(ring, keys, members)
    for node_id, node in zip(cluster.ids, cluster.nodes):
        s = cluster.status(node)
        if s["membership"]["state"] != "committed" or sorted(s["membership"]["members"]) != members:
            return False
        me = next(m for m in s["members"] if m["id"] == node_id)
        if (me["primary_slots"], me["replica_slots"]) != want_slots.get(node_id, (0, 0)):
            raise AssertionError(f"{node_id} holds {me['primary_slots']} primary and "
                                 f"{me['replica_slots']} replica slots; the harness says "
                                 f"{want_slots.get(node_id, (0, 0))}")
        if node.gauge("kv_pool_keys_count") != want_keys.get(node_id, 0):
            return False
    return True


def test_the_harness_places_slots_and_keys_where_the_nodes_do(cluster):
    status = cluster.status(cluster.nodes[0])
    ring = Ring(cluster.ids, slots=status["slots"], replicas=status["replicas"])
    w = FakeWorker(cluster.nodes[0], "owners", 0, ip=unique_ip())
    try:
        w.register()
        settle_fresh_node(cluster.nodes[0], w)
        keys = [k for p in range(100) for k in chunk_hashes(list(range(p * 1000, p * 1000 + 768)))]
        assert any(k < 0 for k in keys) and any(k > 0 for k in keys)
        w.admit(keys)
        members = ["n1", "n2", "n3"]
        wait_until(lambda: agrees(cluster, ring, keys, members), timeout=20,
                   message="every node's slot and key counts as the harness predicts")
        r = cluster.nodes[1].post("/cluster/members", {"members": members + ["n4"]})
        assert r.status == 200, r
        wait_until(lambda: agrees(cluster, ring, keys, members + ["n4"]), timeout=30,
                   message="the counts with the standby a member, as the harness predicts")
    finally:
        w.close()
