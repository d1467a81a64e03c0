"""A three-node cluster on loopback against one single node fed the same events.

Each fake worker's PUSH, DEALER and heartbeat sockets are spread over the
cluster's nodes by a seed (as workers behind a Kubernetes Service would be), and
a twin of it with the same identity talks to a single reference node. Every
answer through every cluster node must equal the reference's: /lookup,
BatchedP2PLookupMsg, /query_worker_info, /query_instance, /controller/workers.
"""

from __future__ import annotations

import random
import secrets

import pytest

from conftest import Node, unique, unique_ip, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import FakeWorker, LOCATION, chunk_hashes, full_sync_status_msg, p2p_lookup_msg

SEEDS = [1, 2]


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path / "cluster").start()
    yield c
    c.stop()


@pytest.fixture
def reference(node_factory):
    return node_factory()


class Via:
    """A socket plan: which node each of a worker's sockets talks to."""

    def __init__(self, pull: Node, reply: Node, heartbeat: Node):
        self.pull_url = pull.pull_url
        self.reply_url = reply.reply_url
        self.heartbeat_url = heartbeat.heartbeat_url


class Twin:
    """One worker identity, in the cluster (sockets spread) and at the reference."""

    def __init__(self, cluster: Cluster, reference: Node, rng: random.Random, instance: str,
                 worker_id: int):
        pick = lambda: rng.choice(cluster.nodes)  # noqa: E731
        self.plan = (pick(), pick(), pick())
        self.c = FakeWorker(Via(*self.plan), instance, worker_id, ip=unique_ip())
        self.r = FakeWorker(reference, instance, worker_id, ip=self.c.ip, control=False,
                            port=self.c.port)

    def register(self):
        reply = self.c.register()
        assert reply["type"] == "RegisterRetMsg"
        # The answer names the node the worker registered through, whichever
        # node is its home.
        assert reply["extra_config"].get("heartbeat_url") in (None, self.plan[1].heartbeat_url), reply
        # Heartbeats keep going to the planned node.
        self.c.heartbeat_url = None
        if self.c.hb_sock is not None:
            self.c.hb_sock.close(0)
            self.c.hb_sock = None
        assert self.r.register()["type"] == "RegisterRetMsg"

    def heartbeat(self):
        return self.c.heartbeat(), self.r.heartbeat()

    def admit(self, keys):
        self.c.admit(keys)
        self.r.admit(keys)

    def evict(self, keys):
        self.c.evict(keys)
        self.r.evict(keys)

    def close(self):
        self.c.close()
        self.r.close()


def p2p(node: Node, hashes: list[int], instance: str, worker_id: int) -> dict:
    w = FakeWorker(node, instance, worker_id, control=False)
    try:
        return w.request(p2p_lookup_msg(hashes, instance, worker_id))
    finally:
        w.close()


def answers(node: Node, prompts: list[list[int]], twins: list[Twin]) -> dict:
    """Everything a router or worker could ask, as plain data."""
    out = {"lookup": [node.lookup(p) for p in prompts]}
    out["p2p"] = [p2p(node, chunk_hashes(p), t.c.instance_id, t.c.worker_id)
                  for p in prompts[:3] for t in twins[:2]]
    for r in out["p2p"]:
        r.pop("event_id", None)
    workers = node.get("/controller/workers").json()["workers"]
    out["workers"] = [{k: v for k, v in w.items() if k not in ("last_heartbeat_time", "registration_time")}
                      for w in workers]
    instances = sorted({t.c.instance_id for t in twins})
    out["worker_info"] = []
    for inst in instances:
        r = node.post("/query_worker_info", {"instance_id": inst, "worker_ids": [0, 1]})
        info = r.json()
        for w in info.get("worker_infos", []):
            w.pop("last_heartbeat_time", None)
            w.pop("registration_time", None)
        info.pop("event_id", None)
        out["worker_info"].append(info)
    out["query_instance"] = []
    for t in twins:
        r = node.post("/query_instance", {"ip": t.c.ip})
        body = r.json()
        body.pop("event_id", None)
        out["query_instance"].append(body)
    return out


def converged_on(nodes: list[Node], reference: Node, prompts: list[list[int]],
                 twins: list["Twin"], what: str, each_poll=None) -> dict:
    """Waits until each of `nodes` answers exactly as the single node does
    (and the trace has hits); on a timeout, fails on the first difference.
    `each_poll` runs before every comparison (workers heartbeating meanwhile,
    as LMCache workers do, and answering the full syncs they are asked for)."""
    want = {}

    def same():
        nonlocal want
        if each_poll is not None:
            each_poll()
        want = answers(reference, prompts, twins)
        return any(want["lookup"]) and all(answers(n, prompts, twins) == want for n in nodes)

    try:
        wait_until(same, timeout=20, interval=0.2, message=f"answers equal the single node {what}")
    except AssertionError:
        for n in nodes:  # the first differences, readably
            for part, value in answers(n, prompts, twins).items():
                if value != want[part]:
                    diff = [(i, got, exp) for i, (got, exp) in enumerate(zip(value, want[part]))
                            if got != exp][:3]
                    raise AssertionError(f"{what}: {n.workdir.name} differs in {part} "
                                         f"(index, got, want): {diff}")
        raise
    return want


def wait_converged(cluster: Cluster, reference: Node, prompts: list[list[int]],
                   twins: list["Twin"], what: str) -> dict:
    """converged_on() over every node of the cluster."""
    return converged_on(cluster.nodes, reference, prompts, twins, what)



@pytest.mark.parametrize("seed", SEEDS)
def test_cluster_answers_equal_a_single_node(cluster, reference, seed):
    rng = random.Random(seed)
    tag = unique(f"cl{seed}")
    twins = [Twin(cluster, reference, rng, f"{tag}-{i}", w) for i in range(2) for w in range(2)]
    try:
        for t in twins:
            t.register()
        for t in twins:
            t.heartbeat()
        base = rng.randrange(1, 1 << 40)
        prompts = [[base + p * 10_000 + i for i in range(256 * rng.randint(1, 12))]
                   for p in range(8)]
        for t in twins:
            for p in rng.sample(prompts, 4):
                hashes = chunk_hashes(p)
                t.admit(hashes[: rng.randint(1, len(hashes))])
        for t in twins[:2]:
            victim = chunk_hashes(rng.choice(prompts))
            t.evict(victim[len(victim) // 2:])

        wait_converged(cluster, reference, prompts, twins, "after the trace")
    finally:
        for t in twins:
            t.close()


def test_a_node_with_the_wrong_secret_is_refused(cluster, tmp_path):
    wrong = tmp_path / "wrong.secret"
    wrong.write_text(secrets.token_hex(32))
    # A fourth process claiming to be n3 with the wrong secret, on n3's cluster port
    # taken by a stranger: stop n3 and start the impostor in its place.
    n3 = cluster.nodes[2]
    assert n3.stop() == 0
    impostor = Node(tmp_path / "impostor", cluster.args("n3", 2, secret_file=wrong))
    impostor.workdir.mkdir(parents=True, exist_ok=True)
    impostor.start()
    try:
        wait_until(lambda: cluster.status(cluster.nodes[0])["joins_refused"] >= 1, timeout=15,
                   message="n1 refuses the impostor's join")
        s = cluster.status(cluster.nodes[0])
        assert [m["live"] for m in s["members"] if m["id"] == "n3"] == [False]
        assert "cluster-join-refused" in cluster.nodes[0].log_text()
        assert cluster.status(impostor)["live_members"] == 1
    finally:
        assert impostor.stop() == 0
    n3.start(keep_ports=True)
    cluster.wait_joined()


def settle(twins: list[Twin], cluster_entry, reference) -> None:
    """A fresh controller asks every worker for one full sync (LMCache's
    need_full_sync_all): do it on both sides so the test starts quiet."""
    from test_durability import commands, full_sync, full_sync_command

    for t in twins:
        for side, node in ((t.c, cluster_entry), (t.r, reference)):
            if commands(side) == [full_sync_command("controller_restart")]:
                full_sync(node, side, "initial")
    for t in twins:
        assert commands(t.c) == [] and commands(t.r) == []


def test_restarts_of_one_node_and_of_all_ask_no_worker_for_a_full_sync(cluster, reference):
    from lmcc_cluster import SpreadNode
    from test_durability import commands

    rng = random.Random(7)
    tag = unique("restart")
    twins = [Twin(cluster, reference, rng, f"{tag}-{i}", w) for i in range(2) for w in range(2)]
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 6)] for p in range(6)]

    def admit_round(r: int):
        for t in twins:
            t.admit(chunk_hashes(prompts[(r + twins.index(t)) % len(prompts)]))

    def converged(what: str):
        wait_converged(cluster, reference, prompts, twins, what)

    try:
        for t in twins:
            t.register()
        settle(twins, SpreadNode(cluster), reference)
        admit_round(0)
        converged("before any restart")

        # One node stopped and started again on its own: it comes back from its
        # store, rejoins, and nobody is asked to resync.
        n2 = cluster.nodes[1]
        assert n2.stop() == 0
        n2.start(keep_ports=True)
        cluster.wait_joined()
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id}/{t.c.worker_id} asked to resync"
        admit_round(1)
        converged("after n2 restarted")

        # The whole cluster stopped and started again.
        for n in cluster.nodes:
            assert n.stop() == 0
        for n in cluster.nodes:
            n.start(keep_ports=True)
        cluster.wait_joined()
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id}/{t.c.worker_id} asked to resync"
        admit_round(2)
        converged("after all three restarted")
        assert "full-sync-requested" not in "".join(n.log_text() for n in cluster.nodes)
    finally:
        for t in twins:
            t.close()


def test_a_cluster_snapshot_boots_a_whole_cluster(cluster, reference, tmp_path):
    import shutil
    import subprocess

    from conftest import BINARY
    from lmcc_cluster import SpreadNode
    from test_durability import commands

    rng = random.Random(11)
    tag = unique("snap")
    twins = [Twin(cluster, reference, rng, f"{tag}-{i}", 0) for i in range(3)]
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 5)] for p in range(3)]

    def converged(what: str):
        wait_converged(cluster, reference, prompts, twins, what)

    try:
        for t in twins:
            t.register()
        settle(twins, SpreadNode(cluster), reference)
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[i]))
        converged("before the snapshot")
        out = tmp_path / "snap"
        r = subprocess.run([str(BINARY), "snapshot", "--cluster",
                            cluster.nodes[1].http_url.removeprefix("http://"), "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "cluster-snapshot-written" in r.stdout and "nodes=3" in r.stdout, r.stdout
        assert sorted(p.name for p in out.iterdir()) == ["n1", "n2", "n3"]

        # Lose every node's data, then boot each from its part of the snapshot.
        for n in cluster.nodes:
            assert n.stop() == 0
            shutil.rmtree(n.workdir / "data")
        for n, node_id in zip(cluster.nodes, cluster.ids):
            n.extra_args = cluster.args(node_id, 2) + ("--restore-from", str(out / node_id))
            n.start(keep_ports=True)
        cluster.wait_joined()
        converged("after booting from the snapshot")
        for t in twins:
            assert commands(t.c) == [], "a restored cluster asks no worker to resync"
    finally:
        for t in twins:
            t.close()


def test_env_never_shows_the_cluster_secret(node_factory, monkeypatch):
    secret = secrets.token_hex(32)
    monkeypatch.setenv("LMCC_CLUSTER_SECRET", secret)
    monkeypatch.setenv("LMCC_SOMETHING_ELSE", "visible")
    n = node_factory()
    env = n.get("/env").json()
    assert env["LMCC_CLUSTER_SECRET"] == "<redacted>"
    assert env["LMCC_SOMETHING_ELSE"] == "visible"
    assert secret not in n.get("/env").text


def repoint(worker: FakeWorker, pull: Node, reply: Node, heartbeat: Node | None = None) -> None:
    """Moves a fake worker's PUSH and DEALER sockets (and its heartbeats) to other nodes."""
    import zmq

    worker.push_sock.close(0)
    worker.push_sock = worker.ctx.socket(zmq.PUSH)
    worker.push_sock.setsockopt(zmq.LINGER, 2000)
    worker.push_sock.connect(f"tcp://{pull.pull_url}")
    worker.req_sock.close(0)
    worker.req_sock = worker._dealer(reply.reply_url)
    if heartbeat is not None:
        if worker.hb_sock is not None:
            worker.hb_sock.close(0)
        worker.hb_sock = worker._dealer(heartbeat.heartbeat_url)


def test_a_reregistration_is_answered_once_every_node_routes_to_the_new_address(
        tmp_path, make_worker):
    """A worker that restarts on a new REP port re-registers; right after the
    answer, a control command sent through any node reaches the new port, as
    with one LMCache controller. The links between the nodes are slowed by
    100 ms, and the worker registers through each node in turn (one is its
    home, which answers without a hop), so a node that learned the new row
    only asynchronously would still send /health to the old port."""
    from lmcc_worker import ControlServer

    cluster = Cluster(tmp_path / "cluster", proxied=True).start()
    try:
        n1 = cluster.nodes[0]
        w = make_worker(n1, unique("newport-slow"), 0)
        w.register()
        for node in cluster.nodes:
            wait_until(lambda node=node: node.workers(w.instance_id) != [],
                       message="every node knows the first registration")
        cluster.slow("n2", 0.1)
        cluster.slow("n3", 0.1)
        for round_, through in enumerate(cluster.nodes):
            repoint(w, n1, through)
            old = w.control
            w.control = ControlServer(w.ctx, w.ip)
            w.port = w.control.port
            try:
                w.register()
                old.health_code = 11
                w.control.health_code = 22 + round_
                for node in cluster.nodes:
                    r = node.post("/health", {"instance_id": w.instance_id})
                    assert r.status == 200, r.text
                    assert r.json()["error_codes"] == {"0": 22 + round_}, (node.http_url, r.json())
            finally:
                old.close()
    finally:
        cluster.heal()
        cluster.stop()


def test_every_node_hears_a_workers_later_heartbeats(cluster, make_worker):
    """A worker's home gathers its workers' later heartbeat times and sends them to
    the other nodes in one message each (lmcc_heartbeat_replication_ms, 1 s): every
    node's copy of the time advances with them, and a node taking the worker over
    counts its silence from there."""
    w = make_worker(cluster.nodes[0], unique("hb-everywhere"), 0)
    w.register()
    registered = {n.http_url: None for n in cluster.nodes}
    for node in cluster.nodes:
        wait_until(lambda node=node: node.workers(w.instance_id) != [],
                   message="every node knows the registration")
        registered[node.http_url] = node.workers(w.instance_id)[0]["registration_time"]
    w.heartbeat()  # the first one is stored and replicated at once

    def times() -> dict:
        return {n.http_url: n.workers(w.instance_id)[0]["last_heartbeat_time"] for n in cluster.nodes}

    wait_until(lambda: all(t > registered[url] for url, t in times().items()),
               message="every node has the first heartbeat's time")
    first = times()
    for _ in range(3):
        w.heartbeat()
    wait_until(lambda: all(t > first[url] for url, t in times().items()),
               message="every node has a later heartbeat's time")


def test_a_node_answers_heartbeats_of_workers_homed_elsewhere_once_nothing_is_owed(cluster,
                                                                                   make_worker):
    """A worker heartbeats to the node it registered through, its home for one
    worker in three. While a full sync is owed only the home asks; once nothing is
    owed that node answers the heartbeats itself (heartbeat_reader.hpp) and tells
    the home, so every node's time of the worker still advances."""
    via = cluster.nodes[0]
    workers = [make_worker(via, unique("hb-here"), 0) for _ in range(6)]
    restart = [{"command_type": "full_sync", "reason": "controller_restart", "args": None}]
    for w in workers:
        w.register()
    # A fresh cluster: every home asks, until a sync completes anywhere (a
    # peer's `completed` may end a node's freeze, as a status query does).
    for w in workers:
        assert w.heartbeat()["commands"] == restart
    for w in workers:
        sync_id = unique("sync")
        assert w.full_sync_start(sync_id, [1, 2, 3], batch_size=2)["accepted"] is True
        w.full_sync_batches(sync_id, [1, 2, 3], batch_size=2)
        w.full_sync_end(sync_id, 3)
    for w in workers:
        wait_until(lambda w=w: w.heartbeat()["commands"] == [], message="nothing owed after the sync")

    def times() -> dict:
        return {(n.http_url, w.instance_id): n.workers(w.instance_id)[0]["last_heartbeat_time"]
                for n in cluster.nodes for w in workers}

    def a_round_answered_in_place() -> bool:
        # A view made stale by the syncs' last states sends one heartbeat to
        # the directory, which publishes a fresh one: rounds settle.
        in_place = via.event_count("heartbeat_answered_in_place")
        for w in workers:
            assert w.heartbeat()["commands"] == []
        return via.event_count("heartbeat_answered_in_place") >= in_place + len(workers)

    before = times()
    wait_until(a_round_answered_in_place, timeout=15,
               message="every heartbeat answered where it arrived, whichever node is the "
                       "worker's home")
    wait_until(lambda: all(t > before[k] for k, t in times().items()),
               message="every node, each worker's home included, has the later heartbeats' time")


def test_a_node_back_from_downtime_learns_the_registrations_it_missed(cluster, reference):
    from lmcc_cluster import SpreadNode

    rng = random.Random(13)
    tag = unique("missed")
    twins = [Twin(cluster, reference, rng, f"{tag}-a{i}", 0) for i in range(6)]
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(10)]
    try:
        for t in twins:
            t.register()
        settle(twins, SpreadNode(cluster), reference)
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[i]))
        wait_converged(cluster, reference, prompts, twins, "before n3 stopped")

        n3 = cluster.nodes[2]
        assert n3.stop() == 0
        live = cluster.nodes[:2]
        wait_until(lambda: all(not next(m for m in cluster.status(n)["members"]
                                        if m["id"] == "n3")["live"] for n in live),
                   message="n1 and n2 see n3 down")

        # While n3 is away: workers homed on n3 cannot register (the answer names
        # the node); two others do, and one registered worker homed elsewhere
        # leaves.
        added = []
        for i in range(16):
            if len(added) == 2:
                break
            t = Twin(cluster, reference, rng, f"{tag}-b{i}", 0)
            repoint(t.c, live[0], live[1])
            reply = t.c.request(t.c.register_message())
            if reply.get("type") != "RegisterRetMsg":
                assert "n3" in str(reply), reply
                t.close()
                continue
            assert t.r.register()["type"] == "RegisterRetMsg"
            added.append(t)
        assert len(added) == 2, "two of sixteen identities should be homed off n3"
        for t in twins:
            repoint(t.c, live[1], live[0])
        # A worker whose home is up answers requests that only the home answers
        # (one homed on n3 gets an error; a heartbeat owing nothing is answered
        # by any node).
        gone = next(t for t in twins if t.c.request(full_sync_status_msg(
            t.c.instance_id, t.c.worker_id, "probe")).get("type") == "FullSyncStatusRetMsg")
        gone.c.deregister()
        gone.r.deregister()
        twins.remove(gone)
        gone.close()
        for i, t in enumerate(added):
            t.admit(chunk_hashes(prompts[6 + i]))
        twins += added
        wait_until(lambda: all(n.workers(gone.c.instance_id) == [] for n in live),
                   message="the deregistration reached n1 and n2")

        n3.start(keep_ports=True)
        cluster.wait_joined()
        wait_converged(cluster, reference, prompts, twins, "after n3 came back")
        assert n3.workers(gone.c.instance_id) == []
        assert "directory-sync-received" in n3.log_text()
    finally:
        for t in twins:
            t.close()
