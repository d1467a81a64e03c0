"""Failover: a node of a three-node cluster killed with SIGKILL and started
again, with workers whose sockets and entities were on it.

Every fake worker has a twin at a single reference node; the cluster must keep
answering as the reference does through the survivors, take over the dead
node's workers without asking them to resync (nothing was lost when ingest was
quiet at the kill), and hand them back when the node returns.
"""

from __future__ import annotations

import random
import re
import shutil
import threading
import time

from conftest import Node, unique, wait_until
from lmcc_cluster import Cluster, SpreadNode
from lmcc_worker import chunk_hashes
from test_cluster import Twin, cluster, converged_on, reference, repoint, settle  # noqa: F401
from test_durability import commands, full_sync

# Default failure timeout of a node (lmcc_cluster_failure_timeout_ms).
FAILURE_TIMEOUT_S = 2.0


def started_twins(cluster: Cluster, reference: Node, rng: random.Random, tag: str, count: int,
                  worker_ids=(0,)) -> list[Twin]:
    """`count` instances x `worker_ids` workers, sockets spread over the
    cluster, registered on both sides and past their first full sync."""
    twins = [Twin(cluster, reference, rng, f"{tag}-{i}", w) for i in range(count) for w in worker_ids]
    try:
        for t in twins:
            t.register()
        settle(twins, SpreadNode(cluster), reference)
    except BaseException:
        for t in twins:
            t.close()
        raise
    return twins


def repoint_all(twin: Twin, rng: random.Random, nodes: list[Node]) -> None:
    """Moves every socket of a worker that used a dead node to live ones."""
    twin.plan = tuple(rng.choice(nodes) for _ in range(3))
    repoint(twin.c, *twin.plan)


def home_of(cluster: Cluster, twin: Twin) -> Node:
    """The node that logged the twin's registration: its home then."""
    mark = f"worker-registered instance={twin.c.instance_id} "
    return next(n for n in cluster.nodes if mark in n.log_text())


def as_new_process(twin: Twin) -> None:
    """Both sides of `twin` become a new worker process: empty cache, seq from
    0 (the caller registers it again)."""
    for side in (twin.c, twin.r):
        side.keys.clear()
        side.next_seq.clear()


def admit_two_prompts_each(rng: random.Random, twins: list[Twin]) -> list[list[int]]:
    """Two 4-chunk prompts per twin, admitted by it; returns them all."""
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(2 * len(twins))]
    for i, t in enumerate(twins):
        t.admit(chunk_hashes(prompts[2 * i]) + chunk_hashes(prompts[2 * i + 1]))
    return prompts


def lookups_complete(nodes: list[Node], reference: Node, prompts) -> bool:
    want = [reference.lookup(p) for p in prompts]
    return all([n.lookup(p) for p in prompts] == want for n in nodes)


def eight_workers_some_homed_on_n3(cluster: Cluster, reference: Node, rng: random.Random,
                                   tag: str, twins: list[Twin]) -> tuple[list, list[Twin]]:
    """Eight workers (added to `twins`, which the caller closes), each with one
    prompt of 8 chunks admitted and settled on every node; returns 16 prompts
    (the second eight for later) and the workers homed on n3."""
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 8)] for p in range(16)]
    twins.extend(started_twins(cluster, reference, rng, tag, 8))
    homed_on_n3 = [t for t in twins if home_of(cluster, t) is cluster.nodes[2]]
    assert homed_on_n3, "no worker is homed on n3 (choose another seed)"
    for i, t in enumerate(twins):
        t.admit(chunk_hashes(prompts[i]))
    converged_on(cluster.nodes, reference, prompts, twins, "before the fault")
    return prompts, homed_on_n3


def lose_both_disks_and_restart_the_first(first: Node, second: Node) -> None:
    """Stops both nodes, removes their data dirs and starts `first` again,
    which copies what the third node holds and leaves the slots it shares
    with `second` (down) over."""
    for n in (first, second):
        assert n.stop() == 0
        shutil.rmtree(n.workdir / "data")
    first.start(keep_ports=True)
    name = first.workdir.name
    wait_until(lambda: re.search(rf"slot-refill-done node={name} .* left=[1-9]", first.log_text()),
               message=f"{name} copied what the third node holds and left the slots it shares "
                       "with the second over")


def resync_until_converged(nodes: list[Node], reference: Node, prompts, twins: list[Twin],
                           what: str) -> dict[str, str]:
    """Heartbeats every twin and runs each full sync it is asked for until
    `nodes` answer as the reference does; returns each instance's last reason."""
    reasons: dict[str, str] = {}

    def heartbeat_and_resync():
        for t in twins:
            for c in commands(t.c):
                reasons[t.c.instance_id] = c["reason"]
                full_sync(t.plan[1], t.c, "after-loss")

    converged_on(nodes, reference, prompts, twins, what, each_poll=heartbeat_and_resync)
    return reasons


def test_kill_9_of_each_node_in_turn_loses_nothing_and_resyncs_no_one(cluster, reference):
    rng = random.Random(21)
    tag = unique("kill")
    twins = started_twins(cluster, reference, rng, tag, 4, worker_ids=(0, 1))
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(12)]
    rounds = iter(range(100))

    def admit_round():
        r = next(rounds)
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[(r + i) % len(prompts)]))
            if r % 2:
                t.evict(chunk_hashes(prompts[(r + i + 5) % len(prompts)])[:3])

    try:
        admit_round()
        converged_on(cluster.nodes, reference, prompts, twins, "before any kill")
        for victim in list(cluster.nodes):
            survivors = [n for n in cluster.nodes if n is not victim]
            killed_at = time.monotonic()
            victim.kill()
            # Complete through the survivors within the detection timeout + 1 s.
            wait_until(lambda: lookups_complete(survivors, reference, prompts),
                       timeout=FAILURE_TIMEOUT_S + 1.0, interval=0.05,
                       message=f"lookups complete after {victim.workdir.name} was killed")
            print(f"{victim.workdir.name}: lookups complete "
                  f"{time.monotonic() - killed_at:.3f}s after kill -9")
            for t in twins:
                if victim in t.plan:
                    repoint_all(t, rng, survivors)
            # Ingest and requests of every worker carry on; the dead node's
            # workers are taken over from the replicated Directory and marks.
            admit_round()
            converged_on(survivors, reference, prompts, twins,
                         f"with {victim.workdir.name} dead")
            for t in twins:
                assert commands(t.c) == [], f"{t.c.instance_id}/{t.c.worker_id} asked to resync"
            victim.start(keep_ports=True)
            cluster.wait_joined()
            admit_round()
            converged_on(cluster.nodes, reference, prompts, twins,
                         f"after {victim.workdir.name} came back")
            for t in twins:
                assert commands(t.c) == [], f"{t.c.instance_id}/{t.c.worker_id} asked to resync"
        logs = "".join(n.log_text() for n in cluster.nodes)
        assert "worker-taken-over" in logs
        assert "full-sync-requested" not in logs
    finally:
        for t in twins:
            t.close()


def test_kill_9_under_ingest_converges_and_only_gapped_workers_resync(cluster, reference):
    rng = random.Random(23)
    tag = unique("killload")
    twins = started_twins(cluster, reference, rng, tag, 6)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 2)] for p in range(40)]
    stop = threading.Event()
    lock = threading.Lock()
    sent = {id(t): 0 for t in twins}

    def ingest():
        r = 0
        while not stop.is_set():
            with lock:
                for i, t in enumerate(twins):
                    t.admit(chunk_hashes(prompts[(r + i) % len(prompts)]))
                    sent[id(t)] += 1
            r += 1
            time.sleep(0.01)

    try:
        feeder = threading.Thread(target=ingest, daemon=True)
        feeder.start()
        wait_until(lambda: min(sent.values()) >= 5, message="ingest running")
        victim = cluster.nodes[0]
        survivors = cluster.nodes[1:]
        touched_victim = {t.c.instance_id for t in twins if victim in t.plan}
        with lock:
            victim.kill()
            for t in twins:
                if victim in t.plan:
                    repoint_all(t, rng, survivors)
        # Ingest keeps running across the failover for a few more rounds.
        after_kill = min(sent.values())
        wait_until(lambda: min(sent.values()) >= after_kill + 20, message="ingest after the kill")
        stop.set()
        feeder.join()
        # A worker whose frames died with the node shows a gap on its next
        # batch and is asked for a full sync; it does one. Nobody else is.
        for t in twins:
            t.admit(chunk_hashes(prompts[0]))
        resynced = []

        def quiet():
            for t in twins:
                cmds = commands(t.c)
                if cmds:
                    resynced.append(t.c.instance_id)
                    full_sync(survivors[0], t.c, "failover")
            return all(commands(t.c) == [] for t in twins)

        wait_until(quiet, timeout=30, interval=0.3, message="every asked worker resynced")
        # A gap found when a takeover's reorder window ends (1 s) is asked at
        # a later heartbeat: the workers keep heartbeating while it converges.
        converged_on(survivors, reference, prompts, twins, "after the kill under ingest",
                     each_poll=quiet)
        victim.start(keep_ports=True)
        cluster.wait_joined()
        converged_on(cluster.nodes, reference, prompts, twins, "after the node came back")
        print(f"workers asked to resync: {sorted(set(resynced))} of {len(twins)}")
        # Only a worker whose frames could die with the node -- it had a socket
        # there, or its entity lived there -- may have a gap.
        logs = "".join(n.log_text() for n in survivors)
        for t in twins:
            homed_on_victim = f"worker-taken-over instance={t.c.instance_id} " in logs
            if t.c.instance_id not in touched_victim and not homed_on_victim:
                assert t.c.instance_id not in resynced, f"{t.c.instance_id} resynced needlessly"
    finally:
        stop.set()
        for t in twins:
            t.close()


def test_a_rolling_restart_under_load_loses_nothing(cluster, reference):
    """Each node in turn stopped cleanly (SIGTERM) and started again while
    workers keep reporting and a router keeps looking up. The stopping node
    hands its workers over first: every lookup of a settled prompt is
    complete, no worker that was quiet meanwhile is asked to resync (their
    entities moved with exact seq trackers), and the end state equals the
    reference's. Busy workers are not asked to resync either: their frames on
    the wire to the stopping node are read before it closes its PULL socket
    (it half-closes each connection and reads until the worker's side closes;
    before that, 1-4 of the 4 busy workers resynced in 8 of 12 runs)."""
    rng = random.Random(29)
    tag = unique("roll")
    busy = started_twins(cluster, reference, rng, f"{tag}-busy", 4)
    quiet = started_twins(cluster, reference, rng, f"{tag}-quiet", 3)
    twins = busy + quiet
    base = rng.randrange(1, 1 << 40)
    settled = [[base + p * 10_000 + i for i in range(256 * 3)] for p in range(len(twins))]
    moving = [[base + (100 + p) * 10_000 + i for i in range(256 * 2)] for p in range(30)]
    stop = threading.Event()
    lock = threading.Lock()
    down: set[str] = set()
    lookups = {"answered": 0, "failed": 0, "partial": 0}

    def ingest():
        r = 0
        while not stop.is_set():
            with lock:
                for i, t in enumerate(busy):
                    t.admit(chunk_hashes(moving[(r + i) % len(moving)]))
                    if r % 3 == 0:
                        t.evict(chunk_hashes(moving[(r + i + 7) % len(moving)])[:2])
            r += 1
            time.sleep(0.01)

    def route(want):
        k = 0
        while not stop.is_set():
            node = cluster.nodes[k % len(cluster.nodes)]
            k += 1
            if node.workdir.name in down:
                continue
            p = k % len(settled)
            try:
                got = node.lookup(settled[p])
            except Exception:  # noqa: BLE001 - a refused connection while it stops
                if node.workdir.name not in down:
                    lookups["failed"] += 1
                continue
            lookups["answered"] += 1
            if got != want[p]:
                lookups["partial"] += 1
            time.sleep(0.005)

    try:
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(settled[i]))
        converged_on(cluster.nodes, reference, settled, twins, "before the rolling restart")
        want = [reference.lookup(p) for p in settled]
        threads = [threading.Thread(target=ingest, daemon=True),
                   threading.Thread(target=route, args=(want,), daemon=True)]
        for th in threads:
            th.start()
        for node in cluster.nodes:
            down.add(node.workdir.name)
            assert node.stop() == 0
            node.start(keep_ports=True)
            cluster.wait_joined()
            down.discard(node.workdir.name)
        stop.set()
        for th in threads:
            th.join()
        for t in quiet:
            assert commands(t.c) == [], f"{t.c.instance_id} (quiet) asked to resync"
        resynced = []

        def heartbeat_and_resync():
            # As LMCache workers do: heartbeats go on, and a full sync asked
            # for is answered. A gap is proven by the next frame after it, which
            # may arrive after the ingest stopped, so one look is not enough.
            for t in busy:
                if commands(t.c):
                    resynced.append(t.c.instance_id)
                    full_sync(cluster.nodes[0], t.c, "rolling")

        assert lookups["answered"] > 0
        assert lookups["failed"] == 0 and lookups["partial"] == 0, lookups
        converged_on(cluster.nodes, reference, settled + moving, twins, "after the rolling restart",
                     each_poll=heartbeat_and_resync)
        print(f"rolling restart: lookups {lookups}; busy workers resynced: "
              f"{len(set(resynced))} of {len(busy)}")
        assert resynced == [], f"busy workers asked to resync: {sorted(set(resynced))}"
    finally:
        stop.set()
        for t in twins:
            t.close()


def test_anti_entropy_repairs_what_a_returning_node_missed(tmp_path, reference):
    """A node is down while more ops are sent to it than its peers keep for
    re-sending (lmcc_peer_buffer_ops), so it comes back with holes. Its
    slots' digests then differ from the other owners' the same way round
    after round, and anti-entropy copies them from the owners up longer:
    every node's answers end equal to the reference."""
    extra = ("--lmcc_peer_buffer_ops=1024", "--lmcc_anti_entropy_interval_ms=300")
    cluster = Cluster(tmp_path / "cluster", extra=extra).start()
    rng = random.Random(31)
    tag = unique("ae")
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 100_000 + i for i in range(256 * 300)] for p in range(12)]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, tag, 4)
        n3 = cluster.nodes[2]
        live = cluster.nodes[:2]
        n3.kill()
        wait_until(lambda: all(not cluster.status(n)["members"][2]["live"] for n in live),
                   message="n1 and n2 see n3 down")
        for t in twins:
            if n3 in t.plan:
                repoint_all(t, rng, live)
        for i, t in enumerate(twins):  # 300 chunks x 3 prompts per worker: past the buffers
            for p in prompts[3 * i:3 * i + 3]:
                t.admit(chunk_hashes(p))
        wait_until(lambda: sum(link["dropped_ops"] for n in live
                               for link in cluster.status(n)["replication"]) > 0,
                   message="the peers dropped ops they could not keep for n3")
        n3.start(keep_ports=True)
        cluster.wait_joined()
        converged_on(cluster.nodes, reference, prompts, twins, "after anti-entropy")
        repaired = cluster.status(n3)["anti_entropy"]["slots_repaired"]
        print(f"anti-entropy: n3 repaired {repaired} slots")
        assert repaired > 0
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id} asked to resync"
        # The holes made the greetings' summaries differ, so the rounds
        # compared; now that the copies agree the greetings vouch for them
        # and the idle rounds compare nothing. (The rounds right after the
        # last copy may still compare.)
        def ae(key: str) -> int:
            return sum(cluster.status(n)["anti_entropy"][key] for n in cluster.nodes)

        deadline = time.monotonic() + 30
        while True:
            compared, skipped = ae("slots_compared"), ae("comparisons_skipped")
            wait_for_rounds(cluster, 2)
            if ae("slots_compared") == compared:
                break
            assert time.monotonic() < deadline, "idle rounds kept comparing slots"
        assert ae("comparisons_skipped") >= skipped + 2 * len(cluster.nodes), \
            "idle rounds did not skip their peers"
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def wait_for_rounds(cluster: Cluster, more: int) -> None:
    """Until every node ran `more` anti-entropy rounds after now."""
    rounds = [cluster.status(n)["anti_entropy"]["rounds"] for n in cluster.nodes]
    wait_until(lambda: all(cluster.status(n)["anti_entropy"]["rounds"] >= r + more
                           for n, r in zip(cluster.nodes, rounds)),
               timeout=10, interval=0.1, message=f"{more} more anti-entropy rounds on every node")


def test_a_thawed_nodes_stale_copies_give_way_to_an_owner_restarted_since(tmp_path, reference):
    """n1 is frozen past the failure timeout while the workers homed on n3 keep
    sending; n3 queues their sub-batches for n1, then restarts cleanly and the
    queue is gone. After the thaw n1 lacks those writes, and it has been up
    longest: the "longest up wins" rule copied its stale slots over n3's
    complete ones and the entries were lost (chaos seed 1033). n1 now finds
    it stood still, its copies are suspect and give way: n3's win, and every
    node converges to the reference."""
    import os
    import signal

    extra = ("--lmcc_anti_entropy_interval_ms=500",)
    cluster = Cluster(tmp_path / "cluster", extra=extra).start()
    rng = random.Random(53)
    twins: list[Twin] = []
    n1, n2, n3 = cluster.nodes
    try:
        prompts, _ = eight_workers_some_homed_on_n3(cluster, reference, rng, unique("stale"),
                                                    twins)
        os.kill(n1.proc.pid, signal.SIGSTOP)
        try:
            wait_until(lambda: all(not cluster.status(n)["members"][0]["live"] for n in (n2, n3)),
                       timeout=FAILURE_TIMEOUT_S + 3, interval=0.05, message="n1 seen down")
            for t in twins:
                if n1 in t.plan:
                    repoint_all(t, rng, [n2, n3])
            for i, t in enumerate(twins):
                t.admit(chunk_hashes(prompts[8 + i]))
            converged_on([n2, n3], reference, prompts, twins, "while n1 is frozen")
            queued = sum(link["queued_ops"] for link in cluster.status(n3)["replication"])
            assert queued > 0, "n3 queued nothing for n1"
            for t in twins:  # n3's workers keep PUSHing to it through the restart
                if n3 in t.plan[1:]:
                    repoint(t.c, t.plan[0], n2, n2)
            assert n3.stop() == 0
            n3.start(keep_ports=True)
        finally:
            os.kill(n1.proc.pid, signal.SIGCONT)
        cluster.wait_joined()
        converged_on(cluster.nodes, reference, prompts, twins, "after the thaw")
        assert "cluster-own-stall node=n1" in n1.log_text()
        assert "anti-entropy-repair" in n1.log_text(), "n1 repaired nothing"
        assert not re.search(r"anti-entropy-repair slot=\d+ from=n1 ", n3.log_text()), \
            "n3 copied n1's stale slots"
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id} asked to resync"
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_an_owner_cut_off_from_a_home_that_dies_gives_way_after_the_heal(tmp_path, reference):
    """n1 is cut off from n3 only (n2 reaches both) while the workers homed on
    n3 keep sending: n3 queues their sub-batches for n1 and is killed -9 before
    the heal, so the queue is gone. n1 lacks those writes; n2 holds those of
    the slots it owns with n1, and n3 (on disk) those it owns with n1. Whole-
    slot rules ("longest up wins") once copied n1's stale slots over the
    complete ones and lost the entries. Copies are compared holder by holder
    now, by the stream position each reflects (index/coverage.hpp): n1's are
    older, so n1 takes the others' and nobody takes n1's, and every node
    converges to the reference with no worker asked to resync."""
    import os
    import signal

    extra = ("--lmcc_anti_entropy_interval_ms=500",)
    cluster = Cluster(tmp_path / "cluster", proxied=True, extra=extra).start()
    rng = random.Random(59)
    twins: list[Twin] = []
    n1, n2, n3 = cluster.nodes
    try:
        prompts, homed_on_n3 = eight_workers_some_homed_on_n3(cluster, reference, rng,
                                                              unique("cutowner"), twins)
        for t in twins:  # every socket at n2 or n3: n1 takes no frame meanwhile
            repoint_all(t, rng, [n2, n3])
        cluster.cut_one_way("n3", "n1")
        cluster.cut_one_way("n1", "n3")
        wait_until(lambda: not cluster.status(n3)["members"][0]["live"]
                   and not cluster.status(n1)["members"][2]["live"],
                   timeout=FAILURE_TIMEOUT_S + 5, interval=0.05, message="the cut seen")
        for i, t in enumerate(homed_on_n3):
            t.admit(chunk_hashes(prompts[8 + i]))
        wait_until(lambda: sum(link["queued_ops"] for link in cluster.status(n3)["replication"]
                               if link["peer"] == "n1") > 0,
                   timeout=10, interval=0.05, message="n3 queued sub-batches for n1")
        converged_on([n3], reference, prompts, twins, "through the home during the cut")
        os.kill(n3.proc.pid, signal.SIGKILL)
        n3.proc.wait()
        cluster.heal()
        for t in twins:
            repoint_all(t, rng, [n1, n2])
        n3.start(keep_ports=True)
        cluster.wait_joined()
        converged_on(cluster.nodes, reference, prompts, twins, "after n3 returned")
        assert "anti-entropy-repair" in n1.log_text(), "n1 repaired nothing"
        for node in (n2, n3):  # logged only when a copy changed something
            assert not re.search(r"anti-entropy-repair slot=\d+ from=n1 ", node.log_text()), \
                f"{node.workdir.name} took n1's stale copies"
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id} asked to resync"
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_a_frozen_node_is_taken_over_and_converges_after_it_thaws(cluster, reference):
    """SIGSTOP isolates a node with its sockets open (nothing answers, nothing
    closes); its peers find it silent within the failure timeout, take its
    workers over and keep the index complete. After SIGCONT it rejoins, and
    every node converges to the reference (the time is printed)."""
    import os
    import signal

    rng = random.Random(37)
    tag = unique("frozen")
    twins = started_twins(cluster, reference, rng, tag, 6)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(12)]
    try:
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[i]))
        converged_on(cluster.nodes, reference, prompts, twins, "before the freeze")
        victim = cluster.nodes[1]
        survivors = [cluster.nodes[0], cluster.nodes[2]]
        os.kill(victim.proc.pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            # Before anyone finds it silent, reads of its slots go to it and
            # wait: each is hedged to the other owner (lmcc_read_hedge_ms),
            # so the answers stay complete rather than lose its slots.
            assert lookups_complete(survivors, reference, prompts[:3]), \
                "a lookup during the detection window lost the frozen node's slots"
            print(f"6 lookups while the node was frozen and not yet found silent took "
                  f"{time.monotonic() - frozen_at:.2f}s, all complete")
            wait_until(lambda: all(not cluster.status(n)["members"][1]["live"] for n in survivors),
                       timeout=FAILURE_TIMEOUT_S + 3, interval=0.05,
                       message="the survivors see the frozen node down")
            print(f"frozen node seen down after {time.monotonic() - frozen_at:.2f}s")
            for t in twins:
                if victim in t.plan:
                    repoint_all(t, rng, survivors)
            for i, t in enumerate(twins):
                t.admit(chunk_hashes(prompts[6 + i]))
            converged_on(survivors, reference, prompts, twins, "while the node is frozen")
        finally:
            os.kill(victim.proc.pid, signal.SIGCONT)
        thawed_at = time.monotonic()
        cluster.wait_joined()
        converged_on(cluster.nodes, reference, prompts, twins, "after the node thawed")
        print(f"converged {time.monotonic() - thawed_at:.2f}s after SIGCONT")
        for t in twins:
            assert commands(t.c) == [], f"{t.c.instance_id} asked to resync"
    finally:
        for t in twins:
            t.close()


def test_a_node_back_with_an_empty_disk_gets_the_index_from_its_peers(tmp_path, reference):
    """A node's disk is replaced: it stops and comes back with an empty data
    dir while its peers run. With R = 2 every slot it owned has another owner,
    and every registration is on every node, so its peers hand it the index
    and the registry (refill_gate.hpp), and every node reads n1's slots from
    the other owners until it has them. No worker is asked for a full sync
    (an LMCache controller that starts empty asks every worker)."""
    cluster = Cluster(tmp_path / "cluster").start()
    rng = random.Random(59)
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("emptydisk"), 4)
        for t in twins:  # registered again after the first syncs: none has synced since
            as_new_process(t)
            t.register()
        prompts = admit_two_prompts_each(rng, twins)
        converged_on(cluster.nodes, reference, prompts, twins, "before the disk is lost")
        n1 = cluster.nodes[0]
        assert n1.stop() == 0
        shutil.rmtree(n1.workdir / "data")
        n1.start(keep_ports=True)
        cluster.wait_joined()
        # While n1 copies its slots every node reads them from the other
        # owners: complete answers from the moment it is back, not only once
        # anti-entropy noticed (rounds later).
        assert lookups_complete(cluster.nodes, reference, prompts)
        converged_on(cluster.nodes, reference, prompts, twins, "after n1 came back empty")
        assert "slot-refill-done node=n1 " in n1.log_text()
        assert [t.c.instance_id for t in twins if commands(t.c)] == []
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_two_disks_lost_one_after_the_other_ask_every_worker_for_a_full_sync(tmp_path, reference):
    """n1 and n2 both lose their disks: with R = 2 the slots only they owned
    have no copy left. n1 comes back first and copies what n3 holds; the
    slots it shares with n2 (down) are left over (refill_leftovers.hpp). When
    n2 comes back empty too, each sees the other unsettled: those slots are
    lost, and every worker is asked for a full sync. The workers' answers give
    the entries back, and every node converges to the single node. Without
    that, the lost entries stay missing on every node."""
    cluster = Cluster(tmp_path / "cluster").start()
    rng = random.Random(61)
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("twodisks"), 4)
        prompts = admit_two_prompts_each(rng, twins)
        converged_on(cluster.nodes, reference, prompts, twins, "before the disks are lost")
        n1, n2 = cluster.nodes[0], cluster.nodes[1]
        lose_both_disks_and_restart_the_first(n1, n2)
        # Logged in the same step as the done line: n2 may come back with its disk.
        assert "slot-refill-lost" not in n1.log_text()
        n2.start(keep_ports=True)
        cluster.wait_joined()
        # Whichever looks first sees the other unsettled (refill_leftovers.hpp).
        wait_until(lambda: any("slot-refill-lost node=" in n.log_text() for n in (n1, n2)),
                   message="n1 or n2 sees that the other came back empty: the slots they "
                           "share are lost")
        reasons = resync_until_converged(cluster.nodes, reference, prompts, twins,
                                         "after both disks were lost")
        assert reasons == {t.c.instance_id: "slot_copies_lost" for t in twins}
    finally:
        for t in twins:
            t.close()
        cluster.stop()
