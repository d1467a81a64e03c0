"""Everything at once: several workers pushing, heartbeating and asking P2P lookups
while HTTP clients look up and scrape. The node must end with exactly the workers'
ground truth and keep answering every request."""

import threading

from conftest import unique, wait_until
from lmcc_worker import LOCATION, chunk_hashes


def test_concurrent_workers_and_http_clients(node, make_worker):
    n_workers, rounds = 6, 40
    workers = [make_worker(node, unique("conc"), 0, peer_init_url=f"127.0.0.1:{7100 + i}")
               for i in range(n_workers)]
    for w in workers:
        w.register()
    shared_tokens = list(range(5_000_000, 5_000_000 + 512))
    shared = chunk_hashes(shared_tokens)
    errors = []
    stop = threading.Event()

    def worker_loop(w, index):
        try:
            w.admit(shared)
            for r in range(rounds):
                base = 10_000_000 * (index + 1) + r * 10
                w.admit(range(base, base + 10))
                w.evict([base + 1, base + 3])
                if r % 10 == 0:
                    assert w.heartbeat()["type"] == "HeartbeatRetMsg"
                    layout = w.p2p_lookup(shared)
                    assert len(layout) == 1 and len(layout[0]) == 4
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(("worker", w.instance_id, repr(e)))

    def http_loop():
        try:
            while not stop.is_set():
                r = node.post("/lookup", {"tokens": shared_tokens})
                assert r.status == 200, r
                assert node.get("/metrics").status == 200
                assert node.get("/controller/key-stats").status == 200
        except Exception as e:  # noqa: BLE001
            errors.append(("http", repr(e)))

    threads = [threading.Thread(target=worker_loop, args=(w, i)) for i, w in enumerate(workers)]
    readers = [threading.Thread(target=http_loop) for _ in range(3)]
    for t in threads + readers:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stop.set()
    for t in readers:
        t.join(timeout=60)
    assert errors == []

    for w in workers:
        wait_until(lambda w=w: node.key_count(w.instance_id) == w.key_count(),
                   message=f"{w.instance_id} to hold its {w.key_count()} keys")
    layout = node.lookup(shared_tokens)
    assert list(layout) == [w.instance_id for w in workers], "every holder, in registration order"
    assert all(v == [LOCATION, 512] for v in layout.values())
    assert node.gauge("kv_op_seq_discontinuity_count") == 0
