"""Full sync, controller side (spec 4.8): start/batch/end/status, missing batches,
progress and freeze threshold, increments discarded while syncing, and the
enforced timeout (decisions table)."""

import time

import pytest

from conftest import unique, wait_until
from lmcc_worker import LOCATION, full_sync_end_msg

DISK = "LocalDiskBackend"


def full_sync_command(reason):
    return {"command_type": "full_sync", "reason": reason, "args": None}


def sync_gauges(node):
    m = node.metrics()
    g = lambda n: m[f'lmcache:cache_controller_full_sync_{n}{{role="controller"}}']  # noqa: E731
    return {"syncing": g("workers_syncing"), "completed": g("workers_completed"),
            "progress": g("global_progress"), "missing": g("missing_batches_total")}


def test_the_heartbeat_right_after_a_start_is_not_asked_to_sync_again(node_factory, make_worker):
    # Its session reports SYNCING after the start's reply has left; the
    # heartbeat sent right after that reply must not ask for another sync
    # (LMCache marks the worker syncing before it answers the start), whether
    # the directory answers it or the socket thread does from its view
    # (heartbeat_reader.hpp, registry::expect_sync_state). Under load the
    # report often came after that heartbeat.
    node = node_factory()
    for i in range(10):
        w = make_worker(node, unique(f"fs-hb-{i}"), 0)
        w.register()
        asked = [full_sync_command("controller_restart")]
        assert w.heartbeat()["commands"] == asked  # the first: the directory's
        assert w.heartbeat()["commands"] == asked  # in place, still frozen
        sync_id = f"{w.instance_id}_0_hb"
        assert w.full_sync_start(sync_id, [1, 2, 3], batch_size=4)["accepted"] is True
        assert w.heartbeat()["commands"] == [], f"worker {i} asked again right after its start"


def test_full_sync_round_trip(node_factory, make_worker):
    node = node_factory()
    w = make_worker(node, unique("fs"), 0)
    w.register()
    assert w.heartbeat()["commands"] == [full_sync_command("controller_restart")]

    # State before the sync: stale keys in the synced location and another location.
    w.admit([1, 2, 3])
    w.admit([4], DISK)
    wait_until(lambda: node.key_count(w.instance_id) == 4, message="4 keys before the sync")

    sync_id = f"{w.instance_id}_0_abcd1234"
    keys = list(range(500, 510))  # 10 keys in batches of 4: ids 0, 1, 2
    start = w.full_sync_start(sync_id, keys, batch_size=4)
    assert start == {"type": "FullSyncStartRetMsg", "sync_id": sync_id, "accepted": True,
                     "error_msg": None}
    assert list(start) == ["type", "sync_id", "accepted", "error_msg"]
    wait_until(lambda: node.key_count(w.instance_id) == 1,
               message="the synced location cleared, the other location kept")

    w.full_sync_batches(sync_id, keys, 4, only=[0, 2])  # batch 1 lost
    wait_until(lambda: node.key_count(w.instance_id) == 1 + 6, message="batches 0 and 2 admitted")
    # Increments while SYNCING are discarded, for every location.
    w.admit([900, 901])
    w.admit([902], DISK)

    status = w.full_sync_status(sync_id)
    assert list(status) == ["type", "sync_id", "is_complete", "global_progress",
                            "can_exit_freeze", "missing_batches"]
    assert status == {"type": "FullSyncStatusRetMsg", "sync_id": sync_id, "is_complete": False,
                      "global_progress": 0.0, "can_exit_freeze": False, "missing_batches": [1]}

    # The worker resends the missing batch, then End.
    w.full_sync_batches(sync_id, keys, 4, only=status["missing_batches"])
    w.full_sync_end(sync_id, len(keys))
    wait_until(lambda: w.full_sync_status(sync_id)["is_complete"], message="sync complete")
    done = w.full_sync_status(sync_id)
    assert done == {"type": "FullSyncStatusRetMsg", "sync_id": sync_id, "is_complete": True,
                    "global_progress": 1.0, "can_exit_freeze": True, "missing_batches": []}
    # All synced keys are in; the discarded increments never reached the index.
    wait_until(lambda: node.key_count(w.instance_id) == 1 + 10, message="11 keys")
    assert sync_gauges(node) == {"syncing": 0, "completed": 1, "progress": 1.0, "missing": 0}

    # After the sync: no command on the next heartbeat, increments apply again,
    # and the first one only re-initialises the seq tracker (no discontinuity).
    assert w.heartbeat()["commands"] == []
    gaps = node.gauge("kv_op_seq_discontinuity_count")
    w.admit([903])
    wait_until(lambda: node.key_count(w.instance_id) == 12, message="post-sync increment applied")
    assert node.gauge("kv_op_seq_discontinuity_count") == gaps


def test_missing_batches_are_reported_then_resent(node_factory, make_worker):
    node = node_factory()
    w = make_worker(node, unique("fs-missing"), 0)
    w.register()
    sync_id = f"{w.instance_id}_0_miss"
    keys = list(range(1000, 1017))  # 17 keys, batches of 4: ids 0..4
    assert w.full_sync_start(sync_id, keys, 4)["accepted"] is True
    w.full_sync_batches(sync_id, keys, 4, only=[0, 2])
    wait_until(lambda: node.key_count(w.instance_id) == 8, message="batches 0 and 2 admitted")

    status = w.full_sync_status(sync_id)
    assert status["is_complete"] is False
    assert status["missing_batches"] == [1, 3, 4]
    assert status["global_progress"] == 0.0
    assert status["can_exit_freeze"] is False
    wait_until(lambda: sync_gauges(node) == {"syncing": 1, "completed": 0, "progress": 0.0,
                                             "missing": 3}, message="gauges while syncing")
    assert w.heartbeat()["commands"] == [], "a SYNCING worker is not asked to sync again"

    # The worker resends exactly the missing batches, then End.
    w.full_sync_batches(sync_id, keys, 4, only=status["missing_batches"])
    wait_until(lambda: w.full_sync_status(sync_id)["missing_batches"] == [],
               message="no batch missing after the resend")
    w.full_sync_end(sync_id, len(keys))
    final = wait_until(lambda: (s := w.full_sync_status(sync_id))["is_complete"] and s,
                       message="complete")
    # The first complete reply already counts this worker as synced.
    assert final["global_progress"] == 1.0 and final["can_exit_freeze"] is True
    wait_until(lambda: node.key_count(w.instance_id) == 17, message="17 keys")


def test_start_conflicts(node, make_worker):
    w = make_worker(node, unique("fs-conflict"), 0)
    w.register()
    keys = [1, 2, 3]
    assert w.full_sync_start("s1", keys, 2)["accepted"] is True
    other = w.full_sync_start("s2", keys, 2)
    assert other["accepted"] is False
    assert other["sync_id"] == "s2"
    assert "already syncing" in other["error_msg"]
    # Restarting with the same sync_id while SYNCING is accepted and resets counters.
    w.full_sync_batches("s1", keys, 2, only=[0])
    wait_until(lambda: w.full_sync_status("s1")["missing_batches"] == [1], message="batch 0 in")
    assert w.full_sync_start("s1", keys, 2)["accepted"] is True
    assert w.full_sync_status("s1")["missing_batches"] == [0, 1]
    # Unknown worker: refused with LMCache's text.
    stranger = make_worker(node, unique("fs-stranger"), 0)
    r = stranger.full_sync_start("s9", keys, 2)
    assert r["accepted"] is False and "worker not found" in r["error_msg"]
    # Status of an unknown worker / sync id: not complete, nothing missing.
    s = stranger.full_sync_status("s9")
    assert s["is_complete"] is False and s["missing_batches"] == []
    assert w.full_sync_status("nope")["missing_batches"] == []
    w.full_sync_end("s1", 3)


def test_batches_and_end_with_a_wrong_sync_id_are_ignored(node, make_worker):
    w = make_worker(node, unique("fs-wrong"), 0)
    w.register()
    assert w.full_sync_start("good", [1, 2], 1)["accepted"] is True
    w.full_sync_batches("bad", [77, 78], 1)          # dropped
    w.push(full_sync_end_msg(w.instance_id, 0, LOCATION, "bad", 2))  # ignored
    w.full_sync_batches("good", [1, 2], 1, only=[0])  # fence
    wait_until(lambda: node.key_count(w.instance_id) == 1, message="only the good batch")
    status = w.full_sync_status("good")
    assert status["is_complete"] is False and status["missing_batches"] == [1]
    w.full_sync_batches("good", [1, 2], 1, only=[1])
    w.full_sync_end("good", 2)
    wait_until(lambda: w.full_sync_status("good")["is_complete"], message="complete")
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="2 keys")


def test_global_progress_and_freeze_threshold(node_factory, make_worker):
    node = node_factory()  # threshold 0.8
    a = make_worker(node, unique("fs-a"), 0)
    b = make_worker(node, unique("fs-b"), 0)
    a.register()
    b.register()
    assert a.full_sync_start("sa", [1], 1)["accepted"] is True
    assert b.full_sync_start("sb", [2], 1)["accepted"] is True
    a.full_sync_batches("sa", [1], 1)
    a.full_sync_end("sa", 1)
    wait_until(lambda: a.full_sync_status("sa")["is_complete"], message="a complete")
    s = a.full_sync_status("sa")
    assert (s["global_progress"], s["can_exit_freeze"]) == (0.5, False)
    assert a.heartbeat()["commands"] == [], "a COMPLETED worker is not asked again"
    b.full_sync_batches("sb", [2], 1)
    b.full_sync_end("sb", 1)
    wait_until(lambda: b.full_sync_status("sb")["is_complete"], message="b complete")
    s = b.full_sync_status("sb")
    assert (s["global_progress"], s["can_exit_freeze"]) == (1.0, True)
    assert sync_gauges(node)["completed"] == 2

    # can_exit_freeze was true once: workers registering later are not asked
    # for a controller_restart sync.
    c = make_worker(node, unique("fs-c"), 0)
    c.register()
    assert c.heartbeat()["commands"] == []


def test_full_sync_timeout_asks_sync_failed_retry(node_factory, make_worker):
    node = node_factory("--full-sync-timeout", "1")
    w = make_worker(node, unique("fs-timeout"), 0)
    w.register()
    # A status poll with no session running sees progress 1.0 and clears the
    # node's "ask everyone" flag, so the only reason left is the timeout
    # (spec 4.8.4 checks controller_restart first).
    assert w.full_sync_status("none")["can_exit_freeze"] is True
    assert w.heartbeat()["commands"] == []

    keys = [1, 2, 3, 4]
    assert w.full_sync_start("stuck", keys, 2)["accepted"] is True
    w.full_sync_batches("stuck", keys, 2, only=[0])
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="batch 0 admitted")
    idle_since = time.monotonic()
    commands = w.heartbeat()["commands"]
    if time.monotonic() - idle_since < 0.5:  # a stalled test machine may already be past 1 s
        assert commands == [], "still SYNCING right after a batch"

    # Go idle: the next heartbeats ask for a retry once the session failed.
    reply = wait_until(lambda: (r := w.heartbeat())["commands"] and r, timeout=10, interval=0.1,
                       message="a heartbeat with a command after the timeout")
    assert reply["commands"] == [full_sync_command("sync_failed_retry")]
    assert time.monotonic() - idle_since >= 0.9, "failed before the 1 s timeout"
    assert "full-sync-timeout" in node.log_text()
    assert sync_gauges(node)["syncing"] == 0

    # FAILED is not SYNCING: increments apply again and a new session is accepted.
    w.admit([50])
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="increment applied after failure")
    assert w.full_sync_start("retry", keys, 2)["accepted"] is True
    w.full_sync_batches("retry", keys, 2)
    w.full_sync_end("retry", 4)
    wait_until(lambda: w.full_sync_status("retry")["is_complete"], message="retry complete")
    assert w.heartbeat()["commands"] == []
    wait_until(lambda: node.key_count(w.instance_id) == 4, message="4 keys")


def test_full_sync_timeout_on_fresh_node_reason(node_factory, make_worker):
    # While the node still asks every worker (no status ever said
    # can_exit_freeze), a failed session is answered with controller_restart:
    # spec 4.8.4 checks that rule first.
    node = node_factory("--full-sync-timeout", "1")
    w = make_worker(node, unique("fs-timeout-fresh"), 0)
    w.register()
    t0 = time.monotonic()
    assert w.full_sync_start("stuck", [1], 1)["accepted"] is True
    commands = w.heartbeat()["commands"]
    if time.monotonic() - t0 < 0.5:
        assert commands == [], "SYNCING: no command"
    reply = wait_until(lambda: (r := w.heartbeat())["commands"] and r, timeout=10, interval=0.1,
                       message="a heartbeat with a command after the timeout")
    assert reply["commands"] == [full_sync_command("controller_restart")]


def test_reregistration_drops_a_running_sync(node, make_worker):
    w = make_worker(node, unique("fs-rereg"), 0)
    w.register()
    assert w.full_sync_start("s", [1, 2], 1)["accepted"] is True
    w.register()  # a restarted worker: its KV state and sync go
    assert w.full_sync_start("other", [3], 1)["accepted"] is True, "no stale SYNCING session"
    w.full_sync_batches("other", [3], 1)
    w.full_sync_end("other", 1)
    wait_until(lambda: w.full_sync_status("other")["is_complete"], message="complete")


def test_end_after_a_timeout_does_not_complete(node_factory, make_worker):
    # LMCache's End needs a matching sync_id only (spec 4.8.2), so an End after
    # the timeout would report a partial key set as complete. lmcc keeps an
    # expired session FAILED: the End is ignored and the worker is asked to
    # retry (sync_failed_retry) at its next heartbeat.
    node = node_factory("--full-sync-timeout", "1")
    w = make_worker(node, unique("fs-late-end"), 0)
    w.register()
    # Clears the fresh node's "ask everyone" flag (see test_timeout above).
    assert w.full_sync_status("none")["can_exit_freeze"] is True
    assert w.full_sync_start("late", [1, 2], 1)["accepted"] is True
    w.full_sync_batches("late", [1, 2], 1, only=[0])  # batch 1 never comes
    wait_until(lambda: "full-sync-timeout" in node.log_text(), timeout=10, interval=0.05,
               message="the session to time out")
    w.full_sync_end("late", 2)
    wait_until(lambda: "full-sync-end-ignored" in node.log_text(), message="the late End ignored")
    status = w.full_sync_status("late")
    assert status["is_complete"] is False, status
    assert sync_gauges(node)["completed"] == 0
    assert w.heartbeat()["commands"] == [full_sync_command("sync_failed_retry")]


def test_status_reply_is_self_consistent_right_after_end(node_factory, make_worker):
    # One worker: when it is complete, progress is 1/1 and it may unfreeze (spec 4.8.3).
    node = node_factory()
    w = make_worker(node, unique("fs-consistent"), 0)
    w.register()
    bad = []
    for i in range(200):
        sync_id = f"s{i}"
        assert w.full_sync_start(sync_id, [i], 1)["accepted"] is True
        w.full_sync_batches(sync_id, [i], 1)
        w.full_sync_end(sync_id, 1)
        s = w.full_sync_status(sync_id)  # the worker's first poll, straight after End
        triple = (s["is_complete"], s["global_progress"], s["can_exit_freeze"])
        if triple not in ((True, 1.0, True), (False, 0.0, False)):
            bad.append((sync_id, triple))
            break
        # End travels the PUSH socket, the next Start the DEALER one: like a real
        # worker, poll until complete before starting another sync.
        wait_until(lambda: w.full_sync_status(sync_id)["is_complete"],
                   message=f"{sync_id} complete")
    assert bad == []
