#!/usr/bin/python3
"""Adding a fourth node and removing one at scale, under lookups.

    /usr/bin/python3 bench/membership_probe.py [--entries 1000000]

Starts four nodes on loopback (n4 a standby; R = 2, persistence on; the
integration suite's harness, build/lmcc), registers worker A on n2, admits
--entries keys through n2, then (1) POST /cluster/members adds n4 and (2) a
second call removes n1. For each change it reports the seconds from the call
until every node shows the change committed, the entries copied, the loopback
bytes moved meanwhile (/proc/net/dev, everything on lo) and both per million
entries copied; a thread meanwhile asks every node (n1 excepted once removed)
for P2P lookups of 20 000 of the keys and counts answers that miss any (a
partial answer) or fail. Needs python3-zmq and python3-msgpack.
"""
import argparse
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from conftest import wait_until  # noqa: E402
from lmcc_cluster import Cluster  # noqa: E402
from lmcc_worker import FakeWorker  # noqa: E402
from test_durability import commands, full_sync  # noqa: E402
from catchup_probe import hits, lo_bytes  # noqa: E402


def membership(node) -> dict:
    return node.get("/cluster/status").json()["membership"]


def change(cluster, via, members, epoch, nodes):
    before = lo_bytes()
    t0 = time.monotonic()
    r = via.post("/cluster/members", {"members": members})
    assert r.status == 200, r.body
    wait_until(lambda: all(membership(n)["epoch"] == epoch and membership(n)["state"] == "committed"
                           for n in nodes), timeout=600, interval=0.05, message="committed")
    seconds = time.monotonic() - t0
    moved = lo_bytes() - before
    copied = sum(membership(n)["entries_copied"] for n in nodes)
    slots = sum(membership(n)["slots_copied"] for n in nodes)
    return seconds, moved, copied, slots


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="lmcc-members-"))
    cluster = Cluster(tmp / "cluster", n=4, standby=frozenset({"n4"})).start()
    n1, n2, n3, n4 = cluster.nodes
    try:
        a = FakeWorker(n2, "members-a", 0, ip="127.0.21.2", peer_init_url="127.0.21.2:9100")
        b = FakeWorker(n2, "members-b", 0, ip="127.0.21.3")
        for w in (a, b):
            assert w.register()["type"] == "RegisterRetMsg"
            if commands(w):
                full_sync(n2, w, "initial")
        rng = random.Random(7)
        keys = [rng.randrange(1, 1 << 62) for _ in range(args.entries)]
        t = time.monotonic()
        for at in range(0, len(keys), 2000):
            a.push(a.ops_message([("admit", k) for k in keys[at:at + 2000]]))
        wait_until(lambda: hits(b, keys[-20_000:], "members-a") == 20_000, timeout=300,
                   message="the cluster holds the keys")
        print(f"ingested {len(keys)} entries through n2 in {time.monotonic() - t:.1f}s")

        sample = keys[:20_000]
        askers = {n: FakeWorker(n, "members-b", 0, ip="127.0.21.3", control=False)
                  for n in cluster.nodes}
        asking = list(cluster.nodes)
        done = threading.Event()
        counts = {"asked": 0, "partial": 0, "failed": 0}

        def lookups():
            while not done.is_set():
                for n in list(asking):
                    try:
                        got = hits(askers[n], sample, "members-a")
                    except Exception:  # noqa: BLE001 - counted, not fatal to the probe
                        counts["failed"] += 1
                        continue
                    counts["asked"] += 1
                    counts["partial"] += got != len(sample)

        th = threading.Thread(target=lookups)
        th.start()
        try:
            for what, members, epoch in (("add n4", ["n1", "n2", "n3", "n4"], 1),
                                         ("remove n1", ["n2", "n3", "n4"], 2)):
                s, moved, copied, slots = change(cluster, n3, members, epoch, cluster.nodes)
                per_m = copied / 1e6 if copied else 1
                print(f"{what}: committed_s={s:.2f} slots_copied={slots} entries_copied={copied} "
                      f"lo_MB={moved / 1e6:.1f} -> {s / per_m:.2f} s and "
                      f"{moved / max(copied, 1):.1f} bytes per entry copied")
            wait_until(lambda: membership(n1)["slots_dropped"] > 0, timeout=60,
                       message="n1 dropped its slots")
            asking.remove(n1)
            seen = counts["asked"]
            wait_until(lambda: counts["asked"] >= seen + 6, timeout=60,
                       message="two more rounds of lookups without n1")
        finally:
            done.set()
            th.join()
        print(f"lookups during both changes: {counts['asked']} P2P lookups of {len(sample)} keys, "
              f"{counts['partial']} partial, {counts['failed']} failed")
        for n in (n2, n3, n4):
            assert hits(askers[n], keys, "members-a") == len(keys), f"{n.http_url} misses keys"
        print("after: n2, n3, n4 each answer every key")
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
