"""Durability (issue 5): a node restarted cleanly or with kill -9 comes back from
its RocksDB with its index, Directory and seq watermarks; a worker whose next
seq_num continues its watermark is not asked for a full sync, a worker with a
gap (and only it) is; snapshots restore; bad snapshots are refused.

Ground truth is each fake worker's own key set (FakeWorker.keys), never the
node's answer. Every wait polls a condition with a deadline."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
import zmq

from conftest import BINARY, unique, wait_until
from lmcc_worker import LOCATION

DISK = "LocalDiskBackend"


def full_sync_command(reason):
    return {"command_type": "full_sync", "reason": reason, "args": None}


def commands(worker) -> list:
    return worker.heartbeat()["commands"]


def flushed(node, worker) -> bool:
    """The node holds exactly as many entries for the worker as it should."""
    return node.key_count(worker.instance_id, worker.worker_id) == worker.key_count()


def full_sync(node, worker, reason_seen: str) -> None:
    """What an LMCache worker does on a FullSyncCommand: for every location,
    start, send its whole key set, end, and wait until the node says complete."""
    for location, keys in list(worker.keys.items()) or [(LOCATION, set())]:
        keys = sorted(keys)
        sync_id = f"{worker.instance_id}_{worker.worker_id}_{reason_seen}_{location}"
        # LMCache's worker tries the start up to full_sync_max_retry_count (3)
        # times, full_sync_retry_delay_s (1 s) apart (spec 4.9): a cluster
        # refuses it while the worker's entity moves between nodes.
        for attempt in range(3):
            reply = worker.full_sync_start(sync_id, keys, 1000, location)
            if reply["accepted"] or attempt == 2:
                break
            time.sleep(1.0)
        assert reply["accepted"], reply
        worker.full_sync_batches(sync_id, keys, 1000, location=location)
        worker.full_sync_end(sync_id, len(keys), location)
        wait_until(lambda: worker.full_sync_status(sync_id)["is_complete"], timeout=20,
                   message=f"full sync {sync_id} complete")


def settle_fresh_node(node, *workers) -> None:
    """A node on an empty store asks every worker for a full sync once (LMCache's
    need_full_sync_all); do those syncs so the tests start from a quiet state."""
    for w in workers:
        cmds = commands(w)
        if cmds == [full_sync_command("controller_restart")]:
            full_sync(node, w, "initial")
    for w in workers:
        assert commands(w) == [], "no further sync requests once synced"


def snapshot(node, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(BINARY), "snapshot", "--node", f"127.0.0.1:{node.http_port}",
                           "--out", str(out)], capture_output=True, text=True, timeout=120)


# -- clean restart ------------------------------------------------------------------------------


def test_clean_restart_keeps_everything_and_asks_no_full_sync(node_factory, make_worker):
    node = node_factory()
    a = make_worker(node, unique("dur-a"), 0, peer_init_url="tcp://127.0.0.1:7001")
    b = make_worker(node, unique("dur-b"), 0)
    a.register()
    b.register()
    settle_fresh_node(node, a, b)
    for i in range(20):
        a.admit(range(i * 100, i * 100 + 50))
        b.admit(range(10_000 + i * 10, 10_000 + i * 10 + 10), DISK)
    a.evict(range(0, 25))
    hashes = a.admit_tokens(list(range(1024)))  # 4 real chunk hashes for /lookup
    for w in (a, b):
        wait_until(lambda: flushed(node, w), message=f"{w.instance_id} flushed")
    workers_before = node.workers()
    lookup_before = node.lookup(list(range(1024)))
    assert lookup_before == {a.instance_id: [LOCATION, 1024]}

    node.restart()
    assert "need_full_sync_all=false" in node.log_text()
    # Same Directory (order, addresses, peer URLs), same index, no sync asked.
    assert [(w["instance_id"], w["worker_id"], w["ip"], w["port"], w["peer_init_url"])
            for w in node.workers()] == \
        [(w["instance_id"], w["worker_id"], w["ip"], w["port"], w["peer_init_url"])
         for w in workers_before]
    assert flushed(node, a) and flushed(node, b)
    assert node.lookup(list(range(1024))) == lookup_before
    assert commands(a) == [] and commands(b) == []
    # The workers go on where they were: their next seq continues the watermark.
    a.evict(hashes[:1])
    b.admit([77_777], DISK)
    for w in (a, b):
        wait_until(lambda: flushed(node, w), message=f"{w.instance_id} flushed after restart")
    assert commands(a) == [] and commands(b) == []
    assert node.gauge("kv_op_seq_discontinuity_count") == 0
    assert node.gauge("kv_pool_keys_count") == a.key_count() + b.key_count()
    # The control channel to a restored worker works: its address came from the store.
    r = node.post("/clear", {"instance_id": b.instance_id, "location": DISK})
    assert r.status == 200, r
    assert len(b.control.requests("ClearWorkerMsg")) == 1


def test_busy_workers_through_a_clean_restart_are_not_asked_to_resync(node_factory, make_worker):
    # Workers that never pause: when the node stops, some of their frames are
    # always on the wire. A clean stop must read them all (the node half-closes
    # each S1 connection and reads until the worker closes its side), so that
    # the first batch after the restart continues every watermark.
    node = node_factory()
    workers = [make_worker(node, unique("dur-busy"), r) for r in range(3)]
    for w in workers:
        w.register()
    settle_fresh_node(node, *workers)
    stop = threading.Event()

    def pump(worker, base):
        # Batches of 20 ops, as a busy LMCache worker sends them, every 0.5 ms
        # (a worker batches for up to 10 ms).
        for i in itertools.count():
            if stop.is_set():
                return
            worker.admit(range(base + i * 20, base + i * 20 + 20))
            time.sleep(0.0005)

    threads = [threading.Thread(target=pump, args=(w, 1_000_000 * (n + 1)))
               for n, w in enumerate(workers)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: node.gauge("kv_pool_keys_count") > 10_000, message="ingest running")
        node.restart()
        restarted_with = node.gauge("kv_pool_keys_count")
        wait_until(lambda: node.gauge("kv_pool_keys_count") > restarted_with + 10_000,
                   message="ingest going on after the restart")
    finally:
        stop.set()
        for t in threads:
            t.join()
    # A lost frame shows as a seq gap at the next batch, and then the worker
    # never flushes: wait for either.
    wait_until(lambda: node.gauge("kv_op_seq_discontinuity_count") > 0 or
               all(flushed(node, w) for w in workers), message="every worker flushed")
    assert node.gauge("kv_op_seq_discontinuity_count") == 0, node.log_tail()
    for w in workers:
        assert flushed(node, w), w.instance_id
        assert commands(w) == [], w.instance_id


def test_deregistered_worker_stays_gone_and_reregistered_worker_stays_reset(node_factory,
                                                                           make_worker):
    node = node_factory()
    gone = make_worker(node, unique("dur-gone"), 0)
    again = make_worker(node, unique("dur-again"), 0)
    for w in (gone, again):
        w.register()
        w.admit(range(1, 200))
    for w in (gone, again):
        wait_until(lambda: flushed(node, w), message="flushed")
    gone.deregister()
    again.keys.clear()
    again.next_seq.clear()
    again.register()  # LMCache clears a re-registering worker's keys
    again.admit([5, 6, 7])
    wait_until(lambda: node.workers(gone.instance_id) == [] and flushed(node, again),
               message="deregistration and reset applied")

    node.restart()
    assert node.workers(gone.instance_id) == []
    assert node.key_count(again.instance_id) == 3
    assert node.gauge("kv_pool_keys_count") == 3
    again.admit([8])
    wait_until(lambda: flushed(node, again), message="the reset worker continues from seq 3")
    assert commands(again) == []


# -- kill -9 ---------------------------------------------------------------------------------------


def test_kill_9_during_heavy_ingest_then_only_workers_with_a_gap_resync(node_factory, make_worker):
    node = node_factory()
    idle = make_worker(node, unique("k9-idle"), 0)
    busy = [make_worker(node, unique("k9-busy"), r) for r in range(3)]
    for w in busy:
        # While the node is dead the PUSH socket queues without a high-water mark,
        # so a send never blocks or drops: what the kill loses is what was on the
        # wire, which shows as a gap at the worker's first batch after the restart.
        w.push_sock.close(0)
        w.push_sock = w.ctx.socket(zmq.PUSH)
        w.push_sock.setsockopt(zmq.SNDHWM, 0)
        w.push_sock.setsockopt(zmq.LINGER, 2000)
        w.push_sock.connect(f"tcp://{node.pull_url}")
    gap = make_worker(node, unique("k9-gap"), 0)
    everyone = [idle, *busy, gap]
    for w in everyone:
        w.register()
    settle_fresh_node(node, *everyone)

    idle.admit(range(500_000, 500_400))
    gap.admit(range(600_000, 600_100))
    wait_until(lambda: flushed(node, idle) and flushed(node, gap), message="idle and gap flushed")

    # Heavy ingest from three workers while the node is killed: each pushes
    # 50-op batches (admits with some evicts) as fast as it can.
    stop = threading.Event()

    def ingest(w, base):
        n = 0
        while not stop.is_set() and n < 4000:
            batches = [w.ops_message([("admit", k) for k in range(base + n * 50,
                                                                 base + n * 50 + 50)])]
            if n % 5 == 4:
                batches.append(w.ops_message([("evict", base + n * 50 - 100 + j)
                                              for j in range(10)]))
            for m in batches:
                w.push(m)
            n += 1

    threads = [threading.Thread(target=ingest, args=(w, (i + 1) * 10_000_000))
               for i, w in enumerate(busy)]
    for t in threads:
        t.start()
    wait_until(lambda: node.gauge("kv_pool_keys_count") > 20_000, timeout=30,
               message="ingest under way")
    node.kill()  # SIGKILL: no shutdown, no flush
    stop.set()
    for t in threads:
        t.join()
    # A batch the dying node never read: the worker's seq counter moved on.
    gap.ops_message([("admit", 600_500)])  # counted in the truth, never sent

    node.start(keep_ports=True)
    assert "store-loaded" in node.log_text()

    # The idle worker lost nothing: no sync, all its keys.
    assert flushed(node, idle)
    idle.admit([500_999])
    wait_until(lambda: flushed(node, idle), message="idle continues")
    # The gap worker's next batch proves the loss: it (and only it) is asked.
    gap.admit([600_600])
    reply = wait_until(lambda: commands(gap), timeout=10, message="gap worker asked to resync")
    assert reply == [full_sync_command("seq_gap_after_restart")]
    assert commands(idle) == []
    full_sync(node, gap, "gap")
    assert flushed(node, gap)

    # Busy workers: each either continues its watermark (no sync) or is asked.
    for w in busy:
        w.admit(range(w.worker_id * 7 + 1, w.worker_id * 7 + 4))
    synced = 0
    def settled_or_asked(w):
        cmds = commands(w)
        if cmds:
            return ("asked", cmds)
        return ("flushed", []) if flushed(node, w) else None

    for w in busy:
        _, cmds = wait_until(lambda: settled_or_asked(w), timeout=20,
                             message=f"{w.instance_id} settled or asked")
        if cmds:
            assert cmds == [full_sync_command("seq_gap_after_restart")], cmds
            full_sync(node, w, "k9")
            synced += 1
        wait_until(lambda: flushed(node, w), timeout=20, message=f"{w.instance_id} equals truth")
        assert commands(w) == []
    for w in everyone:
        assert flushed(node, w), w.instance_id
    assert node.gauge("kv_pool_keys_count") == sum(w.key_count() for w in everyone)
    assert commands(idle) == []
    print(f"busy workers that needed a full sync after kill -9: {synced} of {len(busy)}")


def test_restart_during_full_sync_asks_that_worker_to_sync_again(node_factory, make_worker):
    node = node_factory()
    w = make_worker(node, unique("dur-sync"), 0)
    other = make_worker(node, unique("dur-other"), 0)
    w.register()
    other.register()
    settle_fresh_node(node, w, other)
    other.admit([1, 2, 3])
    sync_id = f"{w.instance_id}_0_cut"
    keys = list(range(100, 300))
    w.keys[LOCATION] = set(keys)
    assert w.full_sync_start(sync_id, keys, 50)["accepted"]
    w.full_sync_batches(sync_id, keys, 50, only=[0, 1])  # then the node stops: no End
    wait_until(lambda: node.key_count(w.instance_id) == 100 and flushed(node, other),
               message="half the sync applied")

    node.restart()
    assert commands(w) == [full_sync_command("restart_during_full_sync")]
    assert commands(other) == []
    full_sync(node, w, "again")
    assert flushed(node, w) and commands(w) == []


# -- snapshots ---------------------------------------------------------------------------------------


def test_snapshot_wipe_restore(node_factory, make_worker, tmp_path):
    node = node_factory()
    still = make_worker(node, unique("snap-still"), 0)
    moving = make_worker(node, unique("snap-moving"), 0)
    for w in (still, moving):
        w.register()
    settle_fresh_node(node, still, moving)
    still.admit(range(1, 301))
    moving.admit(range(1001, 1101))
    for w in (still, moving):
        wait_until(lambda: flushed(node, w), message="flushed before the snapshot")

    out = tmp_path / "snap"
    r = snapshot(node, out)
    assert r.returncode == 0, r.stderr
    # The snapshot is the op log's state: rows, holder states, slot snapshots
    # and the log suffix; the restore below proves it holds all 400 entries.
    assert "snapshot-written" in r.stdout and "workers=2" in r.stdout, r.stdout
    assert (out / "MANIFEST.lmcc.json").is_file()
    # A second snapshot into the same directory is refused (it exists).
    again = snapshot(node, out)
    assert again.returncode == 1 and "refused" in again.stderr, again.stderr

    moving.admit(range(2001, 2051))  # after the snapshot: not in it
    wait_until(lambda: flushed(node, moving), message="post-snapshot ingest")

    assert node.stop() == 0
    data = node.workdir / "data"
    shutil.rmtree(data)
    node.extra_args = ("--restore-from", str(out))
    node.start(keep_ports=True)
    assert "store-restore" in node.log_text()
    assert node.key_count(still.instance_id) == 300
    assert node.key_count(moving.instance_id) == 100
    assert commands(still) == [] and commands(moving) == []
    # The worker that moved on since the snapshot shows a gap; the other does not.
    still.admit([301])
    moving.admit([2051])
    wait_until(lambda: flushed(node, still), message="still continues")
    assert wait_until(lambda: commands(moving), message="moving asked") == \
        [full_sync_command("seq_gap_after_restart")]
    assert commands(still) == []
    full_sync(node, moving, "restore")
    assert flushed(node, moving) and flushed(node, still)


def test_corrupted_or_foreign_snapshot_is_refused_and_the_data_dir_untouched(
        node_factory, make_worker, tmp_path):
    node = node_factory()
    w = make_worker(node, unique("snap-bad"), 0)
    w.register()
    settle_fresh_node(node, w)
    w.admit(range(1, 101))
    wait_until(lambda: flushed(node, w), message="flushed")
    good = tmp_path / "good"
    assert snapshot(node, good).returncode == 0

    # Corrupt one byte of the largest file (an SST) in a copy of the snapshot.
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    victim = max((p for p in bad.iterdir() if p.name != "MANIFEST.lmcc.json"),
                 key=lambda p: p.stat().st_size)
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    victim.write_bytes(bytes(raw))

    w.admit([101])  # the live data dir moves on past the snapshot
    wait_until(lambda: flushed(node, w), message="flushed")
    node.restart("--restore-from", str(bad), expect_ready=False)
    wait_until(lambda: not node.alive(), message="the node refuses to start")
    assert node.proc.returncode == 1
    log = node.log_text()
    assert "cannot restore from snapshot" in log and victim.name in log, node.log_tail()

    # A snapshot of another node id is refused too.
    node.extra_args = ("--restore-from", str(good), "--node-id", "n2")
    node.start(keep_ports=True, expect_ready=False)
    wait_until(lambda: not node.alive(), message="the node refuses to start")
    assert "taken by node 'n1', not 'n2'" in node.log_text(), node.log_tail()

    # The data dir was never touched: a plain start has all 101 keys.
    node.extra_args = ()
    node.start(keep_ports=True)
    assert node.key_count(w.instance_id) == 101
    assert commands(w) == []


def test_persistence_off_forgets_on_restart_as_lmcache_does(node_factory, make_worker):
    node = node_factory("--persistence", "off")
    w = make_worker(node, unique("mem"), 0)
    w.register()
    w.admit([1, 2, 3])
    wait_until(lambda: flushed(node, w), message="flushed")
    node.restart()
    assert node.workers(w.instance_id) == []
    # The unknown worker's heartbeat re-registers it and asks for a full sync.
    assert commands(w) == [full_sync_command("worker_re_registered")]
    assert not (node.workdir / "data").exists()
