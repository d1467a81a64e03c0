#!/usr/bin/python3
"""Catch-up of a node that comes back after missing a million entries.

    /usr/bin/python3 bench/catchup_probe.py [--entries 1000000] [--mode resend|anti-entropy]
        [--preload 7500000] [--ingest-rate 20000] [--lookups]

Starts a three-node cluster on loopback (R = 2, persistence on; the
integration suite's harness, build/lmcc), registers a worker A on n1, kills n3
with SIGKILL, admits --entries fresh keys through n1, waits until n1 holds
them, then starts n3 again and times until n3 answers every key: a P2P lookup
from a second worker through n3 must hit every key (n3 reads its own slots
from its own index). Reported: seconds from the start of the n3 process, the
loopback bytes moved meanwhile (/proc/net/dev, everything on lo), and both
per million entries n3 had to catch up on (about 2/3 of the keys with R = 2).

--mode resend (default): the peers' re-send buffers (lmcc_peer_buffer_ops,
4 M) hold what n3 missed and replay it when it rejoins.
--mode anti-entropy: buffers of 1024 ops overflow, so n3 comes back with
holes and anti-entropy (interval 500 ms) copies the differing slots.

At size: --preload N admits N keys before n3 is killed (with R = 2 each
node then holds 2/3 N: 7.5 M keys is 5 M entries a node), so n3 restarts from
a store that size; --ingest-rate keeps a second worker admitting fresh keys
through n2 at that rate (ops/s) from the kill until n3 caught up; --lookups
keeps a third worker asking P2P lookups of preloaded keys through n1 and n2
all along, each of which must find every key (the report counts them).
Needs python3-zmq and python3-msgpack.
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
from lmcc_worker import FakeWorker, p2p_lookup_msg  # noqa: E402
from test_durability import commands, full_sync  # noqa: E402


def lo_bytes() -> int:
    for line in Path("/proc/net/dev").read_text().splitlines():
        if line.strip().startswith("lo:"):
            fields = line.split(":", 1)[1].split()
            return int(fields[0])  # received on lo (= sent on lo)
    return 0


def hits(asker: FakeWorker, keys: list[int], owner: str) -> int:
    """How many of `keys` (checked in runs of 20 000) the cluster says `owner` holds."""
    total = 0
    for at in range(0, len(keys), 20_000):
        run = keys[at:at + 20_000]
        reply = asker.request(p2p_lookup_msg(run, asker.instance_id, asker.worker_id))
        layout = [e for e in reply.get("layout_info", []) if e[0] == owner]
        got = layout[0][2] if layout else 0
        total += got
        if got < len(run):
            break
    return total


def admit_all(worker: FakeWorker, keys: list[int], run: int = 2000) -> None:
    for at in range(0, len(keys), run):
        worker.push(worker.ops_message([("admit", k) for k in keys[at:at + run]]))


class steady_ingest(threading.Thread):
    """Admits fresh keys through `worker` at `rate` ops/s, in batches of 50,
    until stopped; `keys` keeps what it sent."""

    def __init__(self, worker: FakeWorker, rate: int, seed: int):
        super().__init__(daemon=True)
        self.worker, self.rate, self.rng = worker, rate, random.Random(seed)
        self.keys: list[int] = []
        self.stop = threading.Event()

    def run(self):
        start, sent = time.monotonic(), 0
        while not self.stop.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while sent < due:
                batch = [self.rng.randrange(1, 1 << 62) for _ in range(50)]
                self.worker.push(self.worker.ops_message([("admit", k) for k in batch]))
                self.keys.extend(batch)
                sent += len(batch)
            time.sleep(0.005)


class lookup_probe(threading.Thread):
    """P2P lookups of `keys` (runs of 256) through each of `askers` in turn,
    until stopped: every answer must credit `owner` with every key."""

    def __init__(self, askers: list[FakeWorker], keys: list[int], owner: str, seed: int):
        super().__init__(daemon=True)
        self.askers, self.keys, self.owner = askers, keys, owner
        self.rng = random.Random(seed)
        self.asked = self.complete = self.failed = 0
        self.incomplete: list[str] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for asker in self.askers:
                at = self.rng.randrange(0, len(self.keys) - 256)
                run = self.keys[at:at + 256]
                self.asked += 1
                try:
                    reply = asker.request(p2p_lookup_msg(run, asker.instance_id, asker.worker_id))
                except Exception as e:  # noqa: BLE001 - counted: availability is the question
                    self.failed += 1
                    self.incomplete.append(f"{time.monotonic():.3f} {type(e).__name__}")
                    continue
                layout = [e for e in reply.get("layout_info", []) if e[0] == self.owner]
                got = layout[0][2] if layout else 0
                if got == len(run):
                    self.complete += 1
                else:
                    self.incomplete.append(f"{time.monotonic():.3f} got {got} of {len(run)}")
            time.sleep(0.02)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--mode", choices=["resend", "anti-entropy"], default="resend")
    ap.add_argument("--preload", type=int, default=0,
                    help="keys admitted before n3 is killed (R = 2: 2/3 of them a node)")
    ap.add_argument("--ingest-rate", type=int, default=0,
                    help="ops/s admitted through n2 from the kill until n3 caught up")
    ap.add_argument("--lookups", action="store_true",
                    help="P2P lookups of preloaded keys through n1 and n2 all along")
    args = ap.parse_args()
    extra = ()
    if args.mode == "anti-entropy":
        extra = ("--lmcc_peer_buffer_ops=1024", "--lmcc_anti_entropy_interval_ms=500")
    tmp = Path(tempfile.mkdtemp(prefix="lmcc-catchup-"))
    cluster = Cluster(tmp / "cluster", extra=extra).start()
    n1, n2, n3 = cluster.nodes
    try:
        a = FakeWorker(n1, "catchup-a", 0, ip="127.0.20.2", peer_init_url="127.0.20.2:9100")
        b = FakeWorker(n1, "catchup-b", 0, ip="127.0.20.3")
        for w in (a, b):
            assert w.register()["type"] == "RegisterRetMsg"
            if commands(w):
                full_sync(n1, w, "initial")
        rng = random.Random(5)
        preloaded: list[int] = []
        if args.preload:
            preloaded = [rng.randrange(1, 1 << 62) for _ in range(args.preload)]
            t = time.monotonic()
            admit_all(a, preloaded)
            wait_until(lambda: hits(b, preloaded[-20_000:], "catchup-a") == 20_000, timeout=900,
                       interval=1.0, message="the preload is in")
            print(f"preloaded {len(preloaded)} keys in {time.monotonic() - t:.1f}s; "
                  f"n3 holds ~{2 / 3 * len(preloaded):.0f} entries", flush=True)
        ingest = probe = None
        if args.ingest_rate:
            c = FakeWorker(n2, "catchup-c", 0, ip="127.0.20.4")
            assert c.register()["type"] == "RegisterRetMsg"
            if commands(c):
                full_sync(n2, c, "initial")
            ingest = steady_ingest(c, args.ingest_rate, 9)
            ingest.start()
        if args.lookups and preloaded:
            askers = [FakeWorker(n, "catchup-b", 0, ip="127.0.20.3", control=False)
                      for n in (n1, n2)]
            probe = lookup_probe(askers, preloaded, "catchup-a", 11)
            probe.start()
        n3.kill()
        wait_until(lambda: not cluster.status(n1)["members"][2]["live"], message="n3 down")
        keys = [rng.randrange(1, 1 << 62) for _ in range(args.entries)]
        t = time.monotonic()
        admit_all(a, keys)
        wait_until(lambda: hits(b, keys[-20_000:], "catchup-a") == 20_000, timeout=300,
                   message="n1 holds the keys")
        print(f"ingested {len(keys)} entries through n1 in {time.monotonic() - t:.1f}s "
              f"with n3 down")
        asker = FakeWorker(n3, "catchup-b", 0, ip="127.0.20.3", control=False)
        before = lo_bytes()
        t0 = time.monotonic()
        n3.start(keep_ports=True)
        ready = time.monotonic() - t0
        print(f"n3 ready after {ready:.2f}s", flush=True)
        # Cheap signals first (nothing queued for n3; anti-entropy quiet), then the full check.
        def caught_up():
            queued = sum(link["queued_sub_batches"] for n in (n1, n2)
                         for link in cluster.status(n)["replication"] if link["peer"] == "n3")
            ae = cluster.status(n3)["anti_entropy"]
            quiet = ae["slots_uncertain"] == 0 and (
                args.mode == "resend" or (ae["rounds"] >= 3 and ae["slots_differing"] == 0))
            return queued == 0 and quiet and hits(asker, keys[:20_000], "catchup-a") == 20_000
        wait_until(caught_up, timeout=600, interval=0.2, message="n3 caught up")
        seconds = time.monotonic() - t0
        moved = lo_bytes() - before
        for thread in (ingest, probe):
            if thread:
                thread.stop.set()
                thread.join()
        complete = hits(asker, keys, "catchup-a")
        if preloaded:
            complete_preload = hits(asker, preloaded, "catchup-a")
            print(f"preloaded keys n3 answers: {complete_preload}/{len(preloaded)}")
            assert complete_preload == len(preloaded), "n3 lost preloaded entries"
        if probe:
            print(f"lookups through n1, n2 meanwhile: {probe.asked} asked, {probe.complete} "
                  f"complete, {probe.failed} failed; first incomplete: {probe.incomplete[:5]}")
        if ingest:
            print(f"ingest through n2 meanwhile: {len(ingest.keys)} keys at {args.ingest_rate} "
                  f"ops/s")
        ae = cluster.status(n3)["anti_entropy"]
        held = 2 / 3 * len(keys)
        print(f"mode={args.mode} entries={len(keys)} n3_ready_s={ready:.2f} "
              f"caught_up_s={seconds:.2f} lo_MB={moved / 1e6:.1f} complete={complete}/{len(keys)} "
              f"slots_repaired={ae['slots_repaired']}")
        print(f"per million entries n3 holds (~{held:.0f}): {seconds / held * 1e6:.2f} s, "
              f"{moved / held:.1f} bytes/entry")
        assert complete == len(keys), "n3 is missing entries"
        assert not probe or probe.complete == probe.asked, "a lookup meanwhile was incomplete"
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
