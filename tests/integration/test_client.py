"""The operator's client (docs/client.md) against a real three-node cluster:
`lmcc status` and `lmcc workers` agree with what the nodes' own endpoints say
(/cluster/status, /controller/workers, /controller/key-stats) while the
cluster is healthy; `lmcc status` says degraded, naming the node, once one
node is killed with SIGKILL, and unreachable once every endpoint is dead.
Then, on a cluster with a standby node: `lmcc lookup` answers what /lookup
answers, `lmcc members add` and `lmcc drain` return once the change is
committed on every node, refused changes exit 1, and a change that never
commits (a fake node) exits 3 at --timeout.
"""

from __future__ import annotations

import http.server
import json
import random
import subprocess
import threading
import time

from conftest import BINARY, unique_ip, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import LOCATION, FakeWorker
from fresh_workers import two_fresh_workers
from test_durability import commands, full_sync

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
        a, b = two_fresh_workers(n1, n2, rng)
        workers += [a, b]

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


# -- lmcc lookup, lmcc members add|remove, lmcc drain ---------------------------------------

# A membership change on loopback commits within seconds; the commands wait at most this.
CHANGE_TIMEOUT_S = 60


def run(*args: str, stdin: str | None = None, timeout: float = CLIENT_DEADLINE_S
        ) -> subprocess.CompletedProcess:
    return subprocess.run([str(BINARY), *args], capture_output=True, text=True, input=stdin,
                          timeout=timeout)


def change(*args: str) -> subprocess.CompletedProcess:
    """`lmcc members ...` or `lmcc drain ...`, timed and printed with its output."""
    started = time.monotonic()
    r = run(*args, "--timeout", str(CHANGE_TIMEOUT_S), timeout=CHANGE_TIMEOUT_S + 10)
    print(f"$ lmcc {' '.join(args)}  -> exit {r.returncode} in "
          f"{time.monotonic() - started:.2f}s\n{r.stdout}{r.stderr}")
    return r


def test_lookup_members_add_and_drain_against_a_cluster_with_a_standby(tmp_path):
    """A worker on n2 holds a 600-token prompt; `lmcc lookup` answers the layout
    /lookup answers; `lmcc members add n4` returns once every node has the new
    epoch committed; `lmcc drain n1` once n1 owns nothing; changes the nodes
    refuse exit 1 with their reason; no endpoint answering exits 2."""
    cluster = Cluster(tmp_path / "cluster", n=4, standby=frozenset({"n4"})).start()
    worker = None
    try:
        n1, n2, n3, n4 = cluster.nodes
        worker = FakeWorker(n2, "vllm-lookup", 0, ip=unique_ip())
        worker.register()
        tokens = list(range(7_000_000, 7_000_600))  # chunks (0,256), (256,512), (512,600)
        worker.admit_tokens(tokens)
        held = {worker.instance_id: [LOCATION, 600]}
        wait_until(lambda: all(n.lookup(tokens) == held for n in cluster.nodes), timeout=15,
                   message="every node answers the prompt's layout")

        # -- lmcc lookup: the first endpoint that answers, its layout, who and how long
        prompt_file = tmp_path / "prompt.json"
        prompt_file.write_text(json.dumps(tokens))
        dead_then_n3 = f"127.0.0.1:1,{address(n3)}"
        r = run("lookup", str(prompt_file), "--endpoints", dead_then_n3, "--output", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        print(f"$ lmcc lookup prompt.json --endpoints {dead_then_n3} --output json\n{r.stdout}")
        body = json.loads(r.stdout)
        assert body["layout_info"] == n3.post("/lookup", {"tokens": tokens}).json()["layout_info"]
        assert body["layout_info"] == held
        assert (body["node"], body["asked"]) == ("n3", address(n3)), body
        assert body["event_id"].startswith("Lookup") and body["elapsed_ms"] >= 0
        # Blank-separated tokens on stdin: the same layout, as a table.
        r = run("lookup", "--endpoints", address(n1), stdin=" ".join(map(str, tokens)) + "\n")
        assert r.returncode == 0, r.stdout + r.stderr
        print(f"$ lmcc lookup < prompt\n{r.stdout}")
        lines = r.stdout.splitlines()
        assert lines[0].split() == ["INSTANCE", "LOCATION", "TOKENS"], r.stdout
        assert lines[1].split() == [worker.instance_id, LOCATION, "600"], r.stdout
        assert lines[3].startswith(f"n1 ({address(n1)}) answered in "), r.stdout
        assert lines[3].endswith(": 1 instance holds a prefix of the 600 tokens"), r.stdout
        # A prefix: 300 tokens match the first chunk only. A prompt nobody holds: exit 1.
        r = run("lookup", "-", "--endpoints", address(n2), "-o", "json",
                stdin=json.dumps(tokens[:300]))
        assert r.returncode == 0 and json.loads(r.stdout)["layout_info"] == {
            worker.instance_id: [LOCATION, 256]}, r.stdout + r.stderr
        r = run("lookup", "--endpoints", address(n2), stdin="1 2 3")
        assert r.returncode == 1, r.stdout + r.stderr
        assert "no instance holds a prefix of the 3 tokens" in r.stdout
        r = run("lookup", "--endpoints", address(n2), stdin="1 2 x")
        assert r.returncode == 4 and "token 2 (\"x\") is not an integer" in r.stderr, r.stderr

        # -- lmcc members add n4: returns once every node has epoch 1 committed
        r = change("members", "add", "n4", "--endpoints", address(n2))
        assert r.returncode == 0, r.stdout + r.stderr
        assert r.stdout.startswith("n2 accepted epoch 1: members n1 n2 n3 n4 (were n1 n2 n3)\n")
        assert "epoch 1 committed on every node in " in r.stdout, r.stdout
        progress = [line for line in r.stdout.splitlines() if "s  epoch 1: " in line]
        assert progress and progress[-1].endswith(
            "4/4 committed: n1 committed, n2 committed, n3 committed, n4 committed"), r.stdout
        for node in cluster.nodes:
            m = cluster.status(node)["membership"]
            assert (m["epoch"], m["state"], m["members"]) == (
                1, "committed", ["n1", "n2", "n3", "n4"]), (node.http_port, m)
            assert m["slots_copied"] == m["slots_to_copy"], m
        assert cluster.status(n4)["slots_primary"] > 0

        # -- refused: the client's own refusals and the node's (HTTP 409, its reason)
        r = change("members", "add", "n4", "--endpoints", address(n3))
        assert r.returncode == 1 and "n4 is already a member" in r.stderr, r.stderr
        r = change("members", "add", "n9", "--endpoints", address(n3))
        assert r.returncode == 1, r.stdout + r.stderr
        assert "n3 (" in r.stderr and "refused the change: HTTP 409: \"n9\" is not in this " \
            "node's lmcc_cluster_members" in r.stderr, r.stderr
        r = change("members", "remove", "n1", "n2", "n3", "--endpoints", address(n3), "-o", "json")
        assert r.returncode == 1, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert out["result"] == "refused" and out["http_status"] == 409, out
        assert "lmcc_replicas is 2: a member set needs at least that many nodes" in out["reason"]
        assert committed_epoch(cluster.nodes) == 1  # nothing changed

        # -- lmcc drain n1: n1 leaves the member set and owns nothing
        r = change("drain", "n1", "--endpoints", address(n3), "-o", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert (out["result"], out["epoch"], out["drained"]) == ("committed", 2, "n1"), out
        assert out["members"] == ["n2", "n3", "n4"] and out["previous"] == ["n1", "n2", "n3", "n4"]
        assert [n["phase"] for n in out["nodes"]] == ["committed"] * 4, out
        assert "n1 now owns nothing" in r.stderr and "lmcc members add n1" in r.stderr, r.stderr
        s1 = cluster.status(n1)
        assert (s1["slots_primary"], s1["slots_replica"], s1["workers_homed"]) == (0, 0, 0), s1
        assert committed_epoch(cluster.nodes) == 2
        assert all(n.lookup(tokens) == held for n in cluster.nodes)

        # -- --no-wait returns once accepted; n1 is added back
        r = change("members", "add", "n1", "--no-wait", "--endpoints", address(n4), "-o", "json")
        assert r.returncode == 0, r.stdout + r.stderr
        out = json.loads(r.stdout)
        assert (out["result"], out["epoch"]) == ("accepted", 3) and "nodes" not in out, out
        wait_until(lambda: committed_epoch(cluster.nodes) == 3, timeout=30,
                   message="n1's return committed on every node")

        # -- nothing answering
        assert run("members", "add", "n9", "--endpoints", "127.0.0.1:1").returncode == 2
        assert run("drain", "n2", "--endpoints", "127.0.0.1:1").returncode == 2
        assert run("lookup", "--endpoints", "127.0.0.1:1", stdin="1 2 3").returncode == 2
    finally:
        if worker:
            worker.close()
        cluster.stop()


def committed_epoch(nodes) -> int | None:
    """The epoch every node has committed, or None while they differ or one is joint."""
    seen = {(m["epoch"], m["state"]) for m in
            (n.get("/cluster/status").json()["membership"] for n in nodes)}
    return next(iter(seen))[0] if len(seen) == 1 and next(iter(seen))[1] == "committed" else None


class StuckNode:
    """An HTTP server that answers as a cluster node whose membership change
    never commits: it accepts POST /cluster/members and stays joint."""

    def __init__(self):
        node = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self.reply(node.status())

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                node.epoch = 1
                self.reply({"epoch": 1, "members": [{"id": "f1"}, {"id": "f2"}],
                            "previous": ["f1"], "committed": False})

        self.epoch = 0
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def status(self) -> dict:
        return {"node": "f1", "replicas": 1,
                "members": [{"id": "f1", "http": self.address}, {"id": "f2", "http": ""}],
                "membership": {"epoch": self.epoch, "state": "joint" if self.epoch else "committed",
                               "members": ["f1"] + (["f2"] if self.epoch else []),
                               "slots_to_copy": 10, "slots_copied": 3}}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_a_change_that_does_not_commit_within_the_timeout_exits_3():
    stuck = StuckNode()
    try:
        started = time.monotonic()
        r = run("members", "add", "f2", "--endpoints", stuck.address, "--timeout", "2")
        took = time.monotonic() - started
        print(f"$ lmcc members add f2 --timeout 2  -> exit {r.returncode} in {took:.2f}s\n"
              f"{r.stdout}{r.stderr}")
        assert r.returncode == 3, r.stdout + r.stderr
        assert "epoch 1: 0/2 committed: f1 joint 3/10 slots copied, f2 not answering" in r.stdout
        assert "not committed everywhere within 2s (--timeout)" in r.stderr, r.stderr
        assert 2 <= took < 6, took
    finally:
        stuck.close()
