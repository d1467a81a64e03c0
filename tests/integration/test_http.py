"""The HTTP API (spec 5.1), lmcc's own endpoints and /metrics (spec 5.3);
malformed bodies get a clear 4xx and the node keeps serving."""

import http.client
import re
import socket

import pytest

from conftest import LMCACHE_GAUGES, unique, wait_until
from lmcc_worker import LOCATION

POST_ENDPOINTS = {
    "/lookup": {"tokens": [1, 2, 3]},
    "/query_instance": {"event_id": "e", "ip": "127.0.0.1"},
    "/clear": {"instance_id": "i", "location": LOCATION},
    "/pin": {"instance_id": "i", "location": LOCATION, "tokens": [1]},
    "/compress": {"instance_id": "i", "method": "m", "location": LOCATION},
    "/decompress": {"instance_id": "i", "method": "m", "location": LOCATION},
    "/move": {"old_position": ["i", LOCATION], "new_position": ["j", LOCATION]},
    "/health": {"instance_id": "i"},
    "/check_finish": {"event_id": "e"},
    "/query_worker_info": {"instance_id": "all"},
}


def assert_detail(r, status):
    assert r.status == status, r
    assert r.content_type.startswith("application/json"), r.content_type
    body = r.json()
    assert isinstance(body, dict) and isinstance(body.get("detail"), str) and body["detail"], body
    return body["detail"]


def test_healthz_and_readyz(node):
    r = node.get("/healthz")
    assert r.status == 200 and r.json() == {"status": "ok"}
    r = node.get("/readyz")
    assert r.status == 200 and r.json() == {"status": "ready"}


def test_metrics_has_all_13_lmcache_gauges_exactly_once(node):
    r = node.get("/metrics")
    assert r.status == 200
    assert r.content_type.startswith("text/plain")
    lines = r.text.splitlines()
    for name in LMCACHE_GAUGES:
        samples = [l for l in lines if re.match(re.escape(name) + r"[{ ]", l)]
        assert len(samples) == 1, (name, samples)
        assert samples[0].startswith(name + '{role="controller"} '), samples[0]
        float(samples[0].rsplit(" ", 1)[1])
        assert f"# TYPE {name} gauge" in lines
    # No other lmcache:* series, and lmcc's own series follow Prometheus conventions.
    names = {re.split(r"[{ ]", l, 1)[0] for l in lines if l and not l.startswith("#")}
    assert {n for n in names if n.startswith("lmcache:")} == set(LMCACHE_GAUGES)
    assert any(n.startswith("lmcc_request_duration_seconds_bucket") for n in names)


@pytest.mark.single_node("reads one node's gauges, which count that node's share")
def test_metrics_reflect_state(node, make_worker):
    before = node.metrics()
    w = make_worker(node, unique("metrics"), 0)
    w.register()
    w.admit([1, 2, 3])
    key = lambda n: f'lmcache:cache_controller_{n}{{role="controller"}}'  # noqa: E731
    wait_until(lambda: node.metrics()[key("kv_pool_keys_count")] ==
               before[key("kv_pool_keys_count")] + 3, message="3 more keys in the gauge")
    after = node.metrics()
    assert after[key("registered_workers_count")] == before[key("registered_workers_count")] + 1


def test_controller_workers(node, make_worker):
    inst = unique("cw")
    w0 = make_worker(node, inst, 0, peer_init_url="127.0.0.1:8200")
    w1 = make_worker(node, inst, 1)
    w0.register()
    w1.register()
    w1.admit([1, 2])
    wait_until(lambda: node.key_count(inst, 1) == 2, message="2 keys")

    r = node.get("/controller/workers")
    assert r.status == 200
    body = r.json()
    assert body["total_count"] == len(body["workers"])
    mine = [x for x in body["workers"] if x["instance_id"] == inst]
    assert [x["worker_id"] for x in mine] == [0, 1]

    r = node.get(f"/controller/workers?instance_id={inst}")
    assert r.status == 200
    body = r.json()
    assert body["total_count"] == 2
    assert list(body["workers"][0]) == ["instance_id", "worker_id", "ip", "port", "peer_init_url",
                                        "registration_time", "last_heartbeat_time", "key_count"]

    r = node.get(f"/controller/workers?instance_id={inst}&worker_id=1")
    assert r.status == 200
    one = r.json()
    assert (one["instance_id"], one["worker_id"], one["ip"], one["port"], one["key_count"]) == \
        (inst, 1, w1.ip, w1.port, 2)
    assert one["peer_init_url"] is None

    assert_detail(node.get(f"/controller/workers?instance_id={inst}&worker_id=9"), 404)
    assert_detail(node.get(f"/controller/workers?instance_id={unique('nobody')}"), 404)
    assert_detail(node.get(f"/controller/workers?instance_id={inst}&worker_id=abc"), 422)
    # A lone worker_id is ignored (LMCache's if/elif): every worker.
    r = node.get("/controller/workers?worker_id=1")
    assert r.status == 200 and "workers" in r.json()


def test_controller_key_stats(node, make_worker):
    inst = unique("ks")
    w0 = make_worker(node, inst, 0)
    w1 = make_worker(node, inst, 1)
    w0.register()
    w1.register()
    w0.admit([1, 2, 3])
    w1.admit([1, 4])
    wait_until(lambda: node.key_count(inst) == 5, message="5 entries")
    r = node.get("/controller/key-stats")
    assert r.status == 200
    body = r.json()
    assert list(body) == ["total_key_count", "total_instance_count", "total_worker_count", "instances"]
    [mine] = [i for i in body["instances"] if i["instance_id"] == inst]
    assert mine == {"instance_id": inst, "key_count": 5, "worker_count": 2}
    assert body["total_instance_count"] == len(body["instances"])
    assert body["total_worker_count"] == sum(i["worker_count"] for i in body["instances"])
    assert body["total_key_count"] == sum(i["key_count"] for i in body["instances"])


def test_lookup_endpoint(node):
    r = node.post("/lookup", {"tokens": [1, 2, 3]})
    assert r.status == 200
    assert r.json()["layout_info"] == {}
    assert r.json()["event_id"].startswith("Lookup")
    assert node.post("/lookup", {"tokens": [], "extra": {"nested": [1, None, True]}}).status == 200
    assert_detail(node.post("/lookup", {}), 422)
    assert_detail(node.post("/lookup", {"tokens": "abc"}), 422)
    assert_detail(node.post("/lookup", {"tokens": [1.5]}), 422)
    assert_detail(node.post("/lookup", {"tokens": ["1"]}), 422)
    assert_detail(node.post("/lookup", {"tokens": [2 ** 64]}), 422)
    assert_detail(node.post("/lookup", [1, 2]), 422)


def test_health_and_query_endpoints_without_workers(node):
    r = node.post("/health", {"instance_id": unique("nobody")})
    assert r.status == 200
    assert r.json()["event_id"].startswith("health") and r.json()["error_codes"] == {}
    detail = assert_detail(node.post("/query_instance", {"event_id": "e", "ip": "203.0.113.9"}), 404)
    assert "203.0.113.9" in detail
    assert_detail(node.post("/query_instance", {"ip": "1.2.3.4"}), 422)  # event_id required
    r = node.post("/query_worker_info", {"instance_id": unique("nobody"), "worker_ids": None})
    assert r.status == 200 and r.json()["worker_infos"] == []
    assert_detail(node.post("/query_worker_info", {"instance_id": "all", "worker_ids": "x"}), 422)
    assert_detail(node.post("/query_worker_info", {}), 422)


@pytest.mark.parametrize("path", sorted(POST_ENDPOINTS))
def test_malformed_bodies_get_a_clear_4xx(node, path):
    for body in [b"{not json", b"", b"\xff\xfe", b'{"a": 1', b'{"a": 1} trailing', b"[" * 100_000]:
        assert_detail(node.post(path, body), 400)
    for body in [b"[1, 2]", b'"text"', b"42", b"null"]:
        assert_detail(node.post(path, body), 422)
    # Missing fields -> 422 naming the field.
    required = next(iter(POST_ENDPOINTS[path]))
    partial = {k: v for k, v in POST_ENDPOINTS[path].items() if k != required}
    detail = assert_detail(node.post(path, partial), 422)
    assert required in detail
    # Still serving.
    assert node.get("/healthz").status == 200
    assert node.post("/lookup", {"tokens": [1]}).status == 200


@pytest.mark.parametrize("path,body", [
    ("/clear", {"instance_id": 5, "location": LOCATION}),
    ("/pin", {"instance_id": "i", "location": LOCATION, "tokens": [1, "x"]}),
    ("/compress", {"instance_id": "i", "method": None, "location": LOCATION}),
    ("/move", {"old_position": ["i"], "new_position": ["j", LOCATION]}),
    ("/move", {"old_position": ["i", LOCATION], "new_position": ["j", LOCATION], "should_copy": "yes"}),
    ("/health", {"instance_id": ["i"]}),
])
def test_mistyped_fields_get_422(node, path, body):
    assert_detail(node.post(path, body), 422)


@pytest.mark.single_node("reads one process's /threads")
def test_other_endpoints(node):
    r = node.get("/threads")
    assert r.status == 200
    threads = r.json()
    assert threads and set(threads[0]) == {"thread_id", "name", "state", "function_name",
                                          "cpu_time", "memory_usage"}
    tid = threads[0]["thread_id"]
    r = node.get(f"/threads?thread_id={tid}")
    assert r.status == 200 and [t["thread_id"] for t in r.json()] == [tid]
    r = node.get("/env")
    assert r.status == 200 and isinstance(r.json(), dict)
    assert all(k.startswith(("LMCACHE_", "LMCC_")) for k in r.json())
    r = node.get("/")
    assert r.status == 404 and "Controller Frontend not found" in r.text
    assert_detail(node.get("/no/such/path"), 404)
    assert_detail(node.post("/run_script", {"script": "print(1)"}), 404)  # deliberately absent
    assert_detail(node.get("/lookup"), 405)


def test_raw_http_garbage_does_not_hurt(node):
    # Not HTTP at all, then a truncated request: the server answers or closes, and
    # keeps serving.
    for payload in [b"\x16\x03\x01\x02\x00garbage\r\n\r\n", b"POST /lookup HTTP/1.1\r\nContent-Length: 50\r\n\r\n{\"tok"]:
        with socket.create_connection(("127.0.0.1", node.http_port), timeout=10) as s:
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            try:
                s.recv(4096)
            except OSError:
                pass
    conn = http.client.HTTPConnection("127.0.0.1", node.http_port, timeout=10)
    conn.request("POST", "/lookup", body=b'{"tokens": [1]}', headers={"Content-Type": "application/json"})
    assert conn.getresponse().status == 200
    conn.close()
    assert node.alive()


def test_body_and_token_limits(node_factory):
    node = node_factory("--max-body-bytes", "1000", "--max-tokens", "10")
    detail = assert_detail(node.post("/lookup", {"tokens": list(range(11))}), 413)
    assert "10" in detail
    assert_detail(node.post("/lookup", {"tokens": list(range(400))}), 413)
    assert_detail(node.post("/pin", {"instance_id": "x", "location": LOCATION,
                                     "tokens": list(range(11))}), 413)
    assert node.post("/lookup", {"tokens": list(range(10))}).status == 200
    assert node.get("/healthz").status == 200


def _all_threads_stopped(pid: int) -> bool:
    """True when every thread of `pid` is in state T (stopped), from /proc."""
    import os
    states = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except FileNotFoundError:
            continue
        states.append(stat[stat.rindex(")") + 2])
    return bool(states) and all(state == "T" for state in states)


def test_a_burst_of_new_connections_is_queued_not_dropped(node_factory):
    import signal
    node = node_factory()
    socks = []
    # Freeze the node so that nothing is accepted: the kernel queues completed
    # handshakes up to the listen backlog and drops SYNs beyond it.
    node.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(lambda: _all_threads_stopped(node.proc.pid),
                   message="every thread of the node to be stopped")
        connected = 0
        for _ in range(12):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.settimeout(0.3)
            try:
                s.connect(("127.0.0.1", node.http_port))
                connected += 1
            except OSError:
                pass
            socks.append(s)
    finally:
        node.proc.send_signal(signal.SIGCONT)
        for s in socks:
            s.close()
    assert node.get("/healthz").status == 200
    assert connected == 12, f"only {connected} of 12 connections got through the listen backlog"
