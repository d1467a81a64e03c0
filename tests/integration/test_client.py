"""The operator's client (docs/client.md) against a real three-node cluster:
`lmcc status` and `lmcc workers` agree with what the nodes' own endpoints say
(/cluster/status, /controller/workers, /controller/key-stats) while the
cluster is healthy; `lmcc status` says degraded, naming the node, once one
node is killed with SIGKILL, and unreachable once every endpoint is dead.
"""

from __future__ import annotations

import json
import random
import subprocess

from conftest import BINARY, unique_ip, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import FakeWorker
from test_durability import commands, full_sync, full_sync_command

# Each invocation must end well within this (its own --timeout is 5 s per request).
CLIENT_DEADLINE_S = 20


def lmcc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True,
                          timeout=CLIENT_DEADLINE_S)


def address(node) -> str:
    return f"127.0.0.1:{node.http_port}"


def status_json(endpoints: str) -> tuple[int, dict]:
    r = lmcc("status", "--endpoints", endpoints, "--output", "json")
    return r.returncode, json.loads(r.stdout)


def test_status_and_workers_on_a_healthy_then_degraded_then_dead_cluster(tmp_path):
    rng = random.Random(42)
    cluster = Cluster(tmp_path / "cluster").start()
    workers: list[FakeWorker] = []
    try:
        n1, n2, n3 = cluster.nodes
        every = ",".join(address(n) for n in cluster.nodes)
        # Two workers with their sockets on different nodes, with fixed names
        # (the cluster is this test's own) so that their homes are the same
        # every run. A fresh cluster asks every worker for a full sync
        # (LMCache's start-up freeze) until they have synced; neither has yet.
        a = FakeWorker(n1, "vllm-a", 0, ip=unique_ip())
        b = FakeWorker(n2, "vllm-b", 1, ip=unique_ip())
        workers += [a, b]
        for w, count in ((a, 30), (b, 20)):
            w.register()
            w.admit([rng.getrandbits(63) for _ in range(count)])
            assert commands(w) == [full_sync_command("controller_restart")]

        def stored(node) -> dict:
            return {w["instance_id"]: w["key_count"] for w in node.workers()}

        want = {a.instance_id: 30, b.instance_id: 20}
        for node in cluster.nodes:
            wait_until(lambda: stored(node) == want, message=f"both workers' keys on {address(node)}")
        wait_until(lambda: lmcc("status", "--endpoints", address(n2)).returncode == 0,
                   message="lmcc status says healthy")

        # -- lmcc status, healthy: a table, and JSON that matches each node's own status
        text = lmcc("status", "--endpoints", address(n2))
        assert text.returncode == 0, text.stdout + text.stderr
        lines = text.stdout.splitlines()
        assert lines[0].split()[:4] == ["NODE", "HTTP", "LIVE", "RING"], text.stdout
        for i, node in enumerate(cluster.nodes):
            assert lines[1 + i].split()[:3] == [f"n{i + 1}", address(node), "3/3"], text.stdout
        assert lines[5].startswith("cluster healthy: 3/3 members live"), text.stdout
        assert lines[5].endswith(", 50 entries"), text.stdout

        rc, out = status_json(address(n1))
        assert rc == 0 and out["verdict"] == "healthy" and out["reasons"] == [], out
        assert [n["id"] for n in out["nodes"]] == ["n1", "n2", "n3"]
        own = {s["node"]: s for s in (cluster.status(n) for n in cluster.nodes)}
        for n in out["nodes"]:
            s = own[n["id"]]
            assert n["reachable"] and n["live"] == "3/3", n
            for key in ("ring_version", "slots_primary", "slots_replica", "keys", "entries",
                        "primary_entries", "workers_homed", "version"):
                assert n[key] == s[key], (key, n[key], s[key])
            assert s["version"] == "0.1.0"
            assert s["slots_under_replicated"] == 0 and s["slots_without_live_copy"] == 0
        # Each key has two copies (R = 2); each worker's entity lives on one node.
        assert sum(s["keys"] for s in own.values()) == 2 * 50
        assert sum(s["workers_homed"] for s in own.values()) == 2
        key_stats = n3.get("/controller/key-stats").json()
        assert out["entries"] == key_stats["total_key_count"] == 50

        # -- lmcc workers: the same workers and keys as /controller/workers
        def listed(endpoint: str) -> dict:
            r = lmcc("workers", "--endpoints", endpoint, "--output", "json")
            assert r.returncode == 0, r.stderr
            return json.loads(r.stdout)

        body = listed(address(n3))
        controller = {w["instance_id"]: w for w in n3.workers()}
        assert [w["instance_id"] for w in body["workers"]] == [a.instance_id, b.instance_id]
        homed = {s["node"]: s["workers_homed"] for s in own.values()}
        for w in body["workers"]:
            c = controller[w["instance_id"]]
            for key in ("worker_id", "ip", "port", "key_count", "registration_time"):
                assert w[key] == c[key], (key, w, c)
            assert w["locations"] == 1 and homed[w["home"]] >= 1, (w, homed)
            assert w["last_heartbeat_time"] > 0, w
            # The full-sync state is the home's: what the worker's heartbeats are told.
            assert w["full_sync_seen_by"] == w["home"], w
            assert (w["full_sync"], w["full_sync_reason"]) == ("owed", "controller_restart"), w
        assert body["full_sync"]["completed"] == 0
        table = lmcc("workers", "--endpoints", address(n3))
        assert table.returncode == 0, table.stderr
        rows = table.stdout.splitlines()
        assert rows[0].split() == ["INSTANCE", "WORKER", "ADDRESS", "LOCATIONS", "KEYS", "LAST",
                                   "HEARTBEAT", "HOME", "FULL", "SYNC"], table.stdout
        for row, w, keys in ((rows[1], a, 30), (rows[2], b, 20)):
            cells = row.split()
            assert cells[:5] == [w.instance_id, str(w.worker_id), f"{w.ip}:{w.port}", "1",
                                 str(keys)], table.stdout
            assert row.endswith("owed (controller_restart)"), table.stdout
        assert rows[4].startswith("2 workers in 2 instances, 50 keys;"), table.stdout

        # Once `a` has synced, the freeze ends: nothing is owed, and the
        # heartbeats say so.
        full_sync(n1, a, "initial")
        wait_until(lambda: [(w["full_sync"], body["full_sync"]["completed"])
                            for body in [listed(address(n1))] for w in body["workers"]]
                   == [("none", 1), ("none", 1)], message="lmcc workers: nothing owed")
        assert commands(a) == [] and commands(b) == []

        # -- one node killed: degraded, with the node named
        n3.kill()
        for node in (n1, n2):
            wait_until(lambda: not cluster.status(node)["members"][2]["live"],
                       message=f"{address(node)} sees n3 down")
        degraded = lmcc("status", "--endpoints", every)
        assert degraded.returncode == 1, degraded.stdout + degraded.stderr
        assert "  - n3 is down as n1, n2 see it" in degraded.stdout, degraded.stdout
        assert "2/3 (n3 down)" in degraded.stdout
        row = next(line for line in degraded.stdout.splitlines() if line.startswith("n3 "))
        assert "unreachable" in row, degraded.stdout
        rc, out = status_json(f"{address(n3)},{address(n2)}")  # the first endpoint is dead
        assert rc == 1 and out["verdict"] == "degraded", out
        assert any(r.startswith("n3 ") for r in out["reasons"]), out
        assert any("slots have fewer than 2 live copies" in r for r in out["reasons"]), out
        assert out["entries"] is None and not out["nodes"][2]["reachable"]

        # -- every endpoint dead: unreachable
        n1.kill()
        n2.kill()
        dead = lmcc("status", "--endpoints", every)
        assert dead.returncode == 2, dead.stdout + dead.stderr
        assert "no cluster node answered" in dead.stderr
        rc, out = status_json(every)
        assert rc == 2 and out["verdict"] == "unreachable", out
        assert lmcc("workers", "--endpoints", every).returncode == 2
    finally:
        for w in workers:
            w.close()
        cluster.stop()


def test_a_bad_endpoint_list_is_refused_before_anything_is_asked():
    r = lmcc("status", "--endpoints", "localhost")
    assert r.returncode == 4
    assert "'localhost' is not HOST:PORT" in r.stderr
