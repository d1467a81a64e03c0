"""Partitions: a node cut off from the others (TCP proxies between the nodes
stop moving bytes; the processes keep running), workers restarted or proven
to owe a full sync while the cut lasts, and what every node answers after the
heal. Every fake worker has a twin at a single reference node, as in
test_failover.py.
"""

from __future__ import annotations

import random
import time

from conftest import Node, unique, wait_until
from lmcc_cluster import Cluster
from lmcc_worker import LOCATION, chunk_hashes
from test_cluster import Twin, converged_on, reference, repoint  # noqa: F401
from test_durability import commands, full_sync
from test_failover import FAILURE_TIMEOUT_S, as_new_process, home_of, repoint_all, started_twins


def heal_and_converge(cluster: Cluster, reference: Node, prompts, twins: list[Twin],
                      t: Twin) -> list[float]:
    """Heals the cut and waits until every node answers as the reference,
    worker `t` heartbeating and answering the full syncs it is asked for
    meanwhile; returns when it was asked."""
    cluster.heal()
    cluster.wait_joined()
    asked: list[float] = []

    def heartbeat_and_resync():
        if commands(t.c):
            asked.append(time.monotonic())
            full_sync(t.plan[1], t.c, "after-heal")

    converged_on(cluster.nodes, reference, prompts, twins, "after the heal",
                 each_poll=heartbeat_and_resync)
    return asked


def test_a_partitioned_node_serves_its_side_and_converges_after_the_heal(tmp_path, reference):
    """n3 is cut from n1 and n2 (TCP proxies between the nodes stop moving
    bytes both ways; sockets stay open) while workers attached to each side
    keep reporting. Each side finds the other silent within the failure
    timeout and answers from what it holds (AP: no lookup fails on either
    side). After the heal every node converges to the reference; the time is
    printed. A worker whose frames went to both sides' entities may be asked
    for a full sync; it answers, and the answers still converge."""
    cluster = Cluster(tmp_path / "cluster", proxied=True).start()
    rng = random.Random(41)
    tag = unique("part")
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(12)]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, tag, 6)
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[i]))
        converged_on(cluster.nodes, reference, prompts, twins, "before the partition")
        n1, n2, n3 = cluster.nodes
        sides = {"n3": [n3], "n1n2": [n1, n2]}
        for i, t in enumerate(twins):  # every worker talks to one side only
            repoint_all(t, rng, sides["n3"] if i % 2 == 0 else sides["n1n2"])

        cut_at = time.monotonic()
        cluster.partition({"n3"})

        def sees_down(node, peer_ids):
            members = {m["id"]: m for m in cluster.status(node)["members"]}
            return all(not members[p]["live"] for p in peer_ids)

        wait_until(lambda: sees_down(n3, ("n1", "n2")) and sees_down(n1, ("n3",))
                   and sees_down(n2, ("n3",)), timeout=FAILURE_TIMEOUT_S + 5, interval=0.05,
                   message="both sides see the other down")
        print(f"partition seen on both sides after {time.monotonic() - cut_at:.2f}s")
        for i, t in enumerate(twins):
            t.admit(chunk_hashes(prompts[6 + i]))
            t.evict(chunk_hashes(prompts[i])[:2])
        # Both sides answer (a lookup may miss what the other side holds).
        for node in cluster.nodes:
            for p in prompts:
                assert isinstance(node.lookup(p), dict)

        healed_at = time.monotonic()
        cluster.heal()
        cluster.wait_joined()
        resynced = 0
        for t in twins:  # what LMCache workers do at their next heartbeat
            if commands(t.c):
                resynced += 1
                full_sync(t.plan[1], t.c, "after-heal")
        converged_on(cluster.nodes, reference, prompts, twins, "after the heal")
        print(f"converged {time.monotonic() - healed_at:.2f}s after the heal; "
              f"{resynced}/{len(twins)} workers asked for a full sync")
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_a_copy_that_missed_a_reregistration_drops_the_old_entries_when_it_learns_of_it(
        tmp_path, reference):
    """A worker restarts (a new process: its cache is gone) and registers again
    while an owner node X is down. Its home drops the old entries everywhere it
    can and keeps the drop for X -- then dies by kill -9 before X returns, and
    the drop dies with it. X comes back with the old entries, then the home:
    X has been up longer, so anti-entropy would keep X's stale copy of the
    slots they share. X learns the registration from the third node's
    directory and drops the older holders itself: every node ends up answering
    as the reference (chaos schedules of kill -9 and worker restarts kept such
    entries on every node)."""
    cluster = Cluster(tmp_path / "cluster", extra=("--lmcc_anti_entropy_interval_ms=300",)).start()
    rng = random.Random(47)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(12)]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("lostdrop"), 1)
        t = twins[0]
        for p in prompts:  # 48 keys: slots of every pair of owners
            t.admit(chunk_hashes(p))
        converged_on(cluster.nodes, reference, prompts, twins, "before the faults")
        home = home_of(cluster, t)
        x, third = [n for n in cluster.nodes if n is not home]
        x_id, third_id = (cluster.ids[cluster.nodes.index(n)] for n in (x, third))

        def sees(a: Node, b_id: str) -> bool:
            return next(m for m in cluster.status(a)["members"] if m["id"] == b_id)["live"]

        x.kill()
        for node in (home, third):
            wait_until(lambda: not sees(node, x_id), timeout=FAILURE_TIMEOUT_S + 5,
                       interval=0.05, message="x seen down")
        t.plan = (third, third, third)
        repoint(t.c, *t.plan)
        as_new_process(t)
        t.register()
        wait_until(lambda: all(n.key_count(t.c.instance_id, t.c.worker_id) == 0
                               for n in (home, third)),
                   timeout=10, interval=0.05, message="the re-registration's drop applied")
        home.kill()
        x.start(keep_ports=True)
        wait_until(lambda: sees(x, third_id) and sees(third, x_id), timeout=20,
                   message="x and the third node joined")
        home.start(keep_ports=True)
        cluster.wait_joined()
        t.admit(chunk_hashes(prompts[0]))  # the new process's first keys
        converged_on(cluster.nodes, reference, prompts, twins, "after both came back")
        assert "reason=newer-registration" in x.log_text()
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_frames_of_a_worker_restarted_through_a_cut_off_node_are_not_lost(tmp_path, reference):
    """A worker restarts and registers again through a node cut off from its
    home, which answers at once, while its PUSH socket still feeds the home:
    the home's entity applies the new process's first frames under the old
    registration, and the registration's drop, arriving at the heal, removes
    them. One LMCache controller never sees that order. The home proves it (the
    seq went back to 0 at the old entity, then the entity was renewed) and asks
    the worker for a full sync, after which every node answers as the single
    node does (chaos seeds 678, 696, 903, 908 lost such entries)."""
    cluster = Cluster(tmp_path / "cluster", proxied=True).start()
    rng = random.Random(43)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(3)]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("rerace"), 1)
        t = twins[0]
        t.admit(chunk_hashes(prompts[0]))
        converged_on(cluster.nodes, reference, prompts, twins, "before the partition")
        home = home_of(cluster, t)
        other = next(n for n in cluster.nodes if n is not home)
        other_id = cluster.ids[cluster.nodes.index(other)]
        t.plan = (home, other, other)  # PUSH to the home, requests and heartbeats elsewhere
        repoint(t.c, *t.plan)
        cluster.partition({other_id})
        # Both sides see the cut before the worker restarts: the home takes
        # the seq restart for what it is, not for frames lost with a node
        # found down just after them (a proof too, but not this one).
        for node in cluster.nodes:
            wait_until(lambda: not any(m["live"] for m in cluster.status(node)["members"]
                                       if (m["id"] == other_id) != (node is other)),
                       timeout=FAILURE_TIMEOUT_S + 5, interval=0.05, message="the cut seen")
        as_new_process(t)
        t.register()  # answered by the cut-off node, which took the worker over
        t.admit(chunk_hashes(prompts[1])[:3])
        # The old process's 4 keys and the new one's 3 (the drop waits at the cut).
        wait_until(lambda: home.key_count(t.c.instance_id, t.c.worker_id) == 7,
                   timeout=10, interval=0.05, message="the home's old entity took the frames")
        asked = heal_and_converge(cluster, reference, prompts, twins, t)
        assert asked, "the worker was never asked for a full sync"
        assert "reason=frames_before_registration" in home.log_text()
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_an_older_process_frames_delivered_at_the_heal_are_not_kept(tmp_path, reference):
    """A worker restarts (process P1) and pushes its first keys through a node
    cut off from its home the moment before; that node forwards them into the
    cut, where they wait. The worker restarts again (P2) and registers with
    its home directly; P2 sends nothing. At the heal P1's frames reach the
    home's entity of P2, numbered from 0 like a new process's first frames.
    One LMCache controller would have read them before P2's registration,
    which cleared them. The node that read them stamped them with the
    registration it knew (P1's, or P0's): the home drops them and asks the
    worker for a full sync, after which every node answers as the single node
    does (chaos seed 1456 kept such keys)."""
    cluster = Cluster(tmp_path / "cluster", proxied=True).start()
    rng = random.Random(53)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + p * 10_000 + i for i in range(256 * 4)] for p in range(3)]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("late-old"), 2)
        t, bystander = twins
        bystander.admit(chunk_hashes(prompts[2]))  # the lookups' hits, whatever t holds
        home = home_of(cluster, t)
        via = next(n for n in cluster.nodes if n is not home)
        via_id = cluster.ids[cluster.nodes.index(via)]
        t.plan = (via, home, home)  # frames through `via`, requests and heartbeats to the home
        repoint(t.c, *t.plan)
        t.admit(chunk_hashes(prompts[0]))
        converged_on(cluster.nodes, reference, prompts, twins, "before the restarts")
        as_new_process(t)  # P1
        t.register()
        converged_on(cluster.nodes, reference, prompts, twins, "P1 registered")

        cluster.partition({via_id})
        forwarded = via.event_count("forwards_sent")
        t.admit(chunk_hashes(prompts[1]))  # P1's first frames, seq from 0, into the cut
        wait_until(lambda: via.event_count("forwards_sent") > forwarded, timeout=5,
                   interval=0.02, message="the node forwarded P1's frames to the home")
        as_new_process(t)  # P2, registered with the home: P1's keys are gone
        t.register()
        asked = heal_and_converge(cluster, reference, prompts, twins, t)
        # The answers may converge before P1's frames reach the home (they are
        # dropped either way): the proof, and the ask at a later heartbeat,
        # are waited for.
        wait_until(lambda: "reason=frames_read_before_registration" in home.log_text(),
                   message="the home dropped P1's frames and proved the worker's loss")

        def asked_now() -> bool:
            if not asked and commands(t.c):
                asked.append(time.monotonic())
                full_sync(t.plan[1], t.c, "after-proof")
            return bool(asked)

        wait_until(asked_now, message="the worker asked for a full sync after the proof")
        converged_on(cluster.nodes, reference, prompts, twins, "after the worker's full sync")
        assert all(n.key_count(t.c.instance_id, t.c.worker_id) == 0 for n in cluster.nodes)
    finally:
        for t in twins:
            t.close()
        cluster.stop()


def test_a_proof_a_node_missed_is_asked_through_it(tmp_path, reference):
    """A node answers the heartbeats of workers homed elsewhere when its copy
    owes them nothing (heartbeat_reader.hpp). A node cut off while the home
    proved a gap missed that proof. The home resends what its workers owe to a
    peer that comes back; this cluster runs without that resend
    (lmcc_planted_bug 4), as when the resend came from a node that had not
    heard of the proof yet, so the copy says "nothing owed". The home, told
    which of its workers heartbeated there, hands the node the proof, and the
    worker is asked at a later heartbeat."""
    extra = ("--lmcc_fault_injection=on", "--lmcc_planted_bug=4")
    cluster = Cluster(tmp_path / "cluster", proxied=True, extra=extra).start()
    rng = random.Random(47)
    base = rng.randrange(1, 1 << 40)
    prompts = [[base + i for i in range(256 * 4)]]
    twins: list[Twin] = []
    try:
        twins = started_twins(cluster, reference, rng, unique("missed-proof"), 1)
        t = twins[0]
        home = home_of(cluster, t)
        via = next(n for n in cluster.nodes if n is not home)
        via_id = cluster.ids[cluster.nodes.index(via)]
        t.plan = (home, home, via)  # frames and requests to the home, heartbeats through `via`
        repoint(t.c, *t.plan)
        t.admit(chunk_hashes(prompts[0]))
        converged_on(cluster.nodes, reference, prompts, twins, "before the cut")
        assert commands(t.c) == []

        cluster.partition({via_id})
        # The ring change opens a window in which a gap is a proof of frames
        # lost with a node (worker_logic.hpp); then enough batches in order that
        # the ring change of the heal proves nothing more.
        wait_until(lambda: not cluster.status(home)["all_live"], timeout=FAILURE_TIMEOUT_S + 5,
                   message="the home sees the cut")
        keys = [rng.randrange(1, 1 << 60) for _ in range(81)]
        t.c.push(t.c.ops_message([("admit", keys[0])], seqs=[t.c.next_seq[LOCATION] + 3]))
        for k in keys[1:]:
            t.c.admit([k])
        wait_until(lambda: home.key_count(t.c.instance_id, t.c.worker_id) == t.c.key_count(),
                   message="the home applied every batch")
        assert f"seq-gap-proven instance={t.c.instance_id} " in home.log_text()
        cluster.heal()
        cluster.wait_joined()

        # A heartbeat that finds `via`'s view stale (the heal changed it) goes
        # to its directory and on to the home, which asks; one answered in
        # place, from the copy, says "nothing owed" until the home tells it.
        in_place = via.event_count("heartbeat_answered_in_place")
        want = [{"command_type": "full_sync", "reason": "frames_lost_with_node", "args": None}]
        wait_until(lambda: commands(t.c) == want, timeout=10, interval=0.2,
                   message="the worker asked, through the node that missed the proof")
        if via.event_count("heartbeat_answered_in_place") > in_place:
            wait_until(lambda: "worker-resync-told " in home.log_text(),
                       message="the home told the node's copy what the worker owes")
    finally:
        for t in twins:
            t.close()
        cluster.stop()
