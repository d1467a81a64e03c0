"""Membership changes while serving (docs/operations.md, "Adding and removing
nodes"): a fourth node, configured as a standby, is added with POST
/cluster/members under continuous ingest and lookups; then a node is removed
the same way and stopped. Every lookup during both changes answers completely
(the joint placement reads from owners that held each slot), about 1/N of the
slots move, no worker is asked for a full sync, and a node restarted later
comes back with the current member set from its data dir, whatever its YAML
says."""

from __future__ import annotations

import random
import threading
import time
from types import SimpleNamespace

from conftest import unique, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import chunk_hashes
from test_cluster import Twin, converged_on, reference, settle  # noqa: F401
from test_durability import commands
from test_failover import lose_both_disks_and_restart_the_first, resync_until_converged


def membership(node) -> dict:
    return node.get("/cluster/status").json()["membership"]


def committed_everywhere(nodes, epoch: int) -> bool:
    return all(membership(n)["epoch"] == epoch and membership(n)["state"] == "committed"
               for n in nodes)


def seed_twins(twins, nodes, reference, rng, tag, count, prompts, chunks):
    """Appends `count` twins whose sockets go to `nodes` to `twins` (the caller
    closes them), registers them and settles through nodes[0]; each admits
    two of `prompts` stored prompts of `chunks` chunks. Returns (base, stored)."""
    twins.extend(Twin(SimpleNamespace(nodes=nodes), reference, rng, f"{tag}-{i}", 0)
                 for i in range(count))
    for t in twins:
        t.register()
    settle(twins, nodes[0], reference)
    base = rng.randrange(1, 1 << 40)
    stored = [[base + p * 10_000 + i for i in range(256 * chunks)] for p in range(prompts)]
    for i, t in enumerate(twins):
        t.admit(chunk_hashes(stored[2 * i]) + chunk_hashes(stored[2 * i + 1]))
    return base, stored


class Load:
    """Lookups of `stored` through every node in `nodes`, and ingest of `later`,
    until stopped; failed and partial answers are recorded."""

    def __init__(self, nodes, stored, want, twins, later):
        self.nodes, self.stored, self.want = nodes, stored, want
        self.twins, self.later = twins, later
        self.done = threading.Event()
        self.failed: list[str] = []
        self.partial: list[tuple] = []
        self.looked = 0
        self.admitted = 0
        self.threads = [threading.Thread(target=self.lookups), threading.Thread(target=self.ingest)]
        for t in self.threads:
            t.start()

    def lookups(self):
        while not self.done.is_set():
            for node in list(self.nodes):
                for i, p in enumerate(self.stored):
                    try:
                        r = node.post("/lookup", {"tokens": p}, timeout=10)
                    except OSError as e:
                        self.failed.append(f"{node.http_port}: {e}")
                        continue
                    self.looked += 1
                    if r.status != 200:
                        self.failed.append(f"{node.http_port}: HTTP {r.status} {r.body[:200]!r}")
                    elif r.json()["layout_info"] != self.want[i]:
                        self.partial.append((node.http_port, i, r.json()["layout_info"]))

    def ingest(self):
        for r, keys in enumerate(self.later):
            if self.done.is_set():
                return
            self.twins[r % len(self.twins)].admit(chunk_hashes(keys))
            self.admitted += 1
            self.done.wait(0.2)

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join()


def test_adding_a_node_and_removing_one_while_serving(tmp_path, reference):
    cluster = Cluster(tmp_path, n=4, standby=frozenset({"n4"})).start()
    n1, n2, n3, n4 = cluster.nodes
    twins: list[Twin] = []
    try:
        status = cluster.status(n4)
        assert status["membership"]["epoch"] == 0
        assert status["membership"]["members"] == ["n1", "n2", "n3"]
        assert status["slots_primary"] == 0 and status["slots_replica"] == 0
        slots = status["slots"]

        rng = random.Random(12)
        tag = unique("members")
        # The workers never touch n1 (it is removed and stopped below); n4,
        # a standby at first, forwards what it gets to the workers' homes.
        base, stored = seed_twins(twins, [n2, n3, n4], reference, rng, tag, 4, 8, 4)
        later = [[base + (100 + p) * 10_000 + i for i in range(256 * 2)] for p in range(200)]
        converged_on(cluster.nodes, reference, stored, twins, "before the change")
        want = [reference.lookup(p) for p in stored]

        load = Load(cluster.nodes, stored, want, twins, later)
        try:
            # -- add n4 ---------------------------------------------------------------
            started = time.monotonic()
            r = n2.post("/cluster/members", {"members": ["n1", "n2", "n3", "n4"]})
            assert r.status == 200, r.body
            assert r.json()["epoch"] == 1 and r.json()["committed"] is False
            # A second change while the first moves slots is refused.
            again = n3.post("/cluster/members", {"members": ["n1", "n2", "n3"]})
            assert again.status in (409, 200), again.body
            wait_until(lambda: committed_everywhere(cluster.nodes, 1), timeout=60,
                       message="the addition committed on every node")
            add_s = time.monotonic() - started
            moved = membership(n4)
            st4 = cluster.status(n4)
            print(f"add n4: committed in {add_s:.2f}s; n4 copied {moved['slots_copied']} slots, "
                  f"{moved['entries_copied']} entries; primary {st4['slots_primary']}, "
                  f"replica {st4['slots_replica']} of {slots}")
            # About 1/N of the primaries (and of the copies) went to n4.
            assert abs(st4["slots_primary"] - slots / 4) < slots * 0.1
            assert moved["slots_copied"] == moved["slots_to_copy"] == \
                st4["slots_primary"] + st4["slots_replica"]
            assert moved["copy_failures"] == 0

            # -- remove n1 -----------------------------------------------------------
            started = time.monotonic()
            r = n3.post("/cluster/members", {"members": ["n2", "n3", "n4"]})
            assert r.status == 200, r.body
            wait_until(lambda: committed_everywhere(cluster.nodes, 2), timeout=60,
                       message="the removal committed on every node")
            remove_s = time.monotonic() - started
            wait_until(lambda: membership(n1)["slots_dropped"] > 0, timeout=30,
                       message="n1 dropped the slots it no longer owns")
            st1 = cluster.status(n1)
            assert st1["slots_primary"] == 0 and st1["slots_replica"] == 0
            copied = sum(membership(n)["slots_copied"] for n in (n2, n3, n4))
            print(f"remove n1: committed in {remove_s:.2f}s; {copied} slot copies; "
                  f"n1 dropped {membership(n1)['slots_dropped']} slots")
            assert copied > 0
        finally:
            load.stop()
        print(f"during both changes: {load.looked} lookups, {len(load.failed)} failed, "
              f"{len(load.partial)} partial; {load.admitted} batches admitted")
        assert load.failed == [] and load.partial == [], (load.failed[:5], load.partial[:5])
        assert load.looked > 0 and load.admitted > 0

        # n1 stops; the other three hold everything and answer as one controller.
        assert n1.stop() == 0
        rest = [n2, n3, n4]
        wait_until(lambda: all(cluster.status(n)["all_live"] for n in rest), timeout=20,
                   message="n2..n4 see every member live without n1")
        prompts = stored + later[:load.admitted]
        converged_on(rest, reference, prompts, twins, "after the removal")
        assert [t for t in twins if commands(t.c)] == [], "a worker was asked for a full sync"

        # A node restarted with its original YAML (n1 a member, n4 a standby)
        # comes back with the member set it stored.
        assert n2.restart().alive()
        m2 = membership(n2)
        assert (m2["epoch"], m2["state"], m2["members"]) == (2, "committed", ["n2", "n3", "n4"])
        converged_on(rest, reference, prompts, twins, "after n2's restart")
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_a_member_down_during_a_change_copies_its_slots_when_it_returns(tmp_path, reference):
    """n3 is killed; n1 is removed while n3 is down (the change commits
    without it); n3 restarts from its older record, hears of the commit, copies
    the slots it gained from the nodes that held them, and lookups through
    every node answer completely all along (n3 is read from only once it has
    its slots)."""
    cluster = Cluster(tmp_path, n=3).start()
    n1, n2, n3 = cluster.nodes
    twins: list[Twin] = []
    try:
        rng = random.Random(13)
        tag = unique("down")
        _, stored = seed_twins(twins, [n2], reference, rng, tag, 3, 6, 8)
        converged_on(cluster.nodes, reference, stored, twins, "before the change")
        want = [reference.lookup(p) for p in stored]

        n3.kill()
        wait_until(lambda: not any(m["live"] for m in cluster.status(n2)["members"]
                                   if m["id"] == "n3"), timeout=10, message="n3 seen down")
        load = Load([n1, n2], stored, want, twins, [])
        try:
            r = n2.post("/cluster/members", {"members": ["n2", "n3"]})
            assert r.status == 200, r.body
            wait_until(lambda: committed_everywhere([n1, n2], 1), timeout=30,
                       message="the removal committed without n3")
            started = time.monotonic()
            n3.start(keep_ports=True)
            load.nodes.append(n3)
            wait_until(lambda: committed_everywhere([n3], 1)
                       and membership(n3)["slots_copied"] == membership(n3)["slots_to_copy"] > 0,
                       timeout=30, message="n3 copied the slots it gained")
            back_s = time.monotonic() - started
            wait_until(lambda: load.looked > 200, timeout=30, message="lookups through n3")
        finally:
            load.stop()
        m3 = membership(n3)
        print(f"n3 back: {m3['slots_copied']} slots, {m3['entries_copied']} entries copied "
              f"{back_s:.2f}s after its start; {load.looked} lookups, {len(load.failed)} failed, "
              f"{len(load.partial)} partial")
        assert load.failed == [] and load.partial == [], (load.failed[:5], load.partial[:5])
        assert n1.stop() == 0
        converged_on([n2, n3], reference, stored, twins, "after n1 left")
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_a_cluster_snapshot_carries_the_member_set(tmp_path, reference):
    """n1 is removed; the cluster is snapshotted, every node's data is lost,
    and each node boots from its part of the snapshot with its original YAML
    (n1 a member). The member set comes back from the snapshot (epoch 1,
    n2 and n3), not from the YAML, so the restored nodes place slots as the
    data they restored was placed: lookups are complete and no worker is
    asked for a full sync."""
    import shutil
    import subprocess

    from conftest import BINARY

    cluster = Cluster(tmp_path, n=3).start()
    n1, n2, n3 = cluster.nodes
    twins: list[Twin] = []
    try:
        rng = random.Random(14)
        tag = unique("snapm")
        _, stored = seed_twins(twins, [n2, n3], reference, rng, tag, 3, 6, 4)
        converged_on(cluster.nodes, reference, stored, twins, "before the change")

        r = n2.post("/cluster/members", {"members": ["n2", "n3"]})
        assert r.status == 200, r.body
        wait_until(lambda: committed_everywhere(cluster.nodes, 1), timeout=60,
                   message="the removal committed on every node")
        wait_until(lambda: membership(n1)["slots_dropped"] > 0, timeout=30,
                   message="n1 dropped the slots it no longer owns")
        converged_on([n2, n3], reference, stored, twins, "after the removal")

        out = tmp_path / "snap"
        r = subprocess.run([str(BINARY), "snapshot", "--cluster",
                            n2.http_url.removeprefix("http://"), "--out", str(out)],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr
        for node_id in ("n2", "n3"):
            assert (out / node_id / "lmcc-membership.json").is_file(), sorted(
                p.name for p in (out / node_id).iterdir())

        for n in cluster.nodes:
            assert n.stop() == 0
            shutil.rmtree(n.workdir / "data")
        for n, node_id in zip(cluster.nodes, cluster.ids):
            if (out / node_id).is_dir():
                n.extra_args = cluster.args(node_id, 2) + ("--restore-from", str(out / node_id))
            n.start(keep_ports=True)
        cluster.wait_joined()
        for n in cluster.nodes:
            m = membership(n)
            assert (m["epoch"], m["state"], m["members"]) == (1, "committed", ["n2", "n3"]), m
        converged_on([n2, n3], reference, stored, twins, "after booting from the snapshot")
        assert [t for t in twins if commands(t.c)] == [], "a worker was asked for a full sync"
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_removing_a_down_owner_of_slots_left_over_asks_every_worker_for_a_full_sync(
        tmp_path, reference):
    """n1 and n2 lose their disks; n1 comes back first and leaves the slots it
    shares with n2 (down) over. The operator then removes n2: n3 becomes the
    other owner of those slots, with the copy the old owners could give it --
    n1's, empty. n3 is no source for them (refill_leftovers.hpp): no owner
    from when they were left is left, so they are lost and every worker is
    asked for a full sync. Before, n1 copied n3's empty copy and the entries
    were gone from every node, with nothing asking for them."""
    cluster = Cluster(tmp_path, n=3).start()
    n1, n2, n3 = cluster.nodes
    twins: list[Twin] = []
    try:
        rng = random.Random(16)
        _, stored = seed_twins(twins, [n3], reference, rng, unique("leftrm"), 3, 6, 8)
        converged_on(cluster.nodes, reference, stored, twins, "before the disks are lost")
        lose_both_disks_and_restart_the_first(n1, n2)
        r = n3.post("/cluster/members", {"members": ["n1", "n3"]})
        assert r.status == 200, r.body
        wait_until(lambda: committed_everywhere([n1, n3], 1), timeout=30,
                   message="the removal committed without n2")
        wait_until(lambda: "slot-refill-lost node=n1" in n1.log_text(), timeout=30,
                   message="n1 reports the slots no owner from then holds as lost")
        reasons = resync_until_converged([n1, n3], reference, stored, twins, "after the removal")
        assert reasons == {t.c.instance_id: "slot_copies_lost" for t in twins}
    finally:
        for t in twins:
            t.close()
        cluster.stop()
