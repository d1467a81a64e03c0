#!/usr/bin/python3
"""Idle /lookup and P2P latency through each node, one client at a time.

    /usr/bin/python3 bench/lookup_probe.py 127.0.0.1:21000,127.0.0.1:21010,127.0.0.1:21020

Each argument is a node's HTTP address; its pull, reply and heartbeat ports are
HTTP+1, +2, +3 (as `lmcc cluster up` assigns them). Registers four fake workers
(spread over the nodes), admits 40 prompts of 20 chunks, waits until every node
answers the last prompt, then times 300 /lookup (HTTP keep-alive) and 300
BatchedP2PLookupMsg per node. Needs python3-zmq and python3-msgpack.
"""
import http.client
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integration"))
from lmcc_worker import FakeWorker, chunk_hashes, p2p_lookup_msg  # noqa: E402


class Endpoints:
    def __init__(self, http: str):
        host, port = http.rsplit(":", 1)
        self.host, self.http_port = host, int(port)
        self.pull_url = f"{host}:{self.http_port + 1}"
        self.reply_url = f"{host}:{self.http_port + 2}"
        self.heartbeat_url = f"{host}:{self.http_port + 3}"


def lookup_body(tokens):
    return json.dumps({"tokens": tokens}).encode()


def lookup(conn, body):
    """One /lookup; `body` is encoded beforehand (json.dumps of 5120 tokens
    costs this Python client ~300 us, which is not the controller's)."""
    conn.request("POST", "/lookup", body, {"Content-Type": "application/json"})
    return json.loads(conn.getresponse().read())


def main():
    nodes = [Endpoints(a) for a in sys.argv[1].split(",")]
    workers = []
    for i in range(4):
        w = FakeWorker(nodes[i % len(nodes)], f"probe-{i}", 0, ip=f"127.0.9.{i + 1}")
        w.register()
        workers.append(w)
    prompts = [[j * 100_000 + t for t in range(256 * 20)] for j in range(40)]
    for j, p in enumerate(prompts):
        workers[j % 4].admit(chunk_hashes(p))
    bodies = [lookup_body(p) for p in prompts]
    requests = [p2p_lookup_msg(chunk_hashes(p), "probe-0", 0) for p in prompts]
    for n in nodes:  # every node sees the last prompt's keys
        conn = http.client.HTTPConnection(n.host, n.http_port)
        deadline = time.monotonic() + 20
        while not lookup(conn, bodies[-1]).get("layout_info") and time.monotonic() < deadline:
            time.sleep(0.05)
    for n in nodes:
        conn = http.client.HTTPConnection(n.host, n.http_port)
        lat = []
        for k in range(300):
            t = time.perf_counter()
            lookup(conn, bodies[k % 40])
            lat.append((time.perf_counter() - t) * 1e6)
        w = FakeWorker(n, "probe-0", 0, control=False)
        p2p = []
        for k in range(300):
            t = time.perf_counter()
            w.request(requests[k % 40])
            p2p.append((time.perf_counter() - t) * 1e6)
        w.close()
        lat.sort()
        p2p.sort()
        print(f"node {n.host}:{n.http_port}: /lookup p50 {lat[150]:.0f} p99 {lat[296]:.0f} us; "
              f"p2p p50 {p2p[150]:.0f} p99 {p2p[296]:.0f} us")
    for w in workers:
        w.close()


if __name__ == "__main__":
    main()
