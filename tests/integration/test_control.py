"""Controller -> worker commands over the workers' REP endpoints (spec 4.10,
decisions table): fan-out, aggregation, per-request timeouts (--control-timeout-ms
500 in this suite), queueing of concurrent commands to one worker."""

import socket
import threading
import time

import pytest

from conftest import CONTROL_TIMEOUT_MS, unique, wait_until
from lmcc_worker import LOCATION, Answer, Error, Never, Raw, Slow

TIMEOUT_S = CONTROL_TIMEOUT_MS / 1000


@pytest.fixture
def instance(node, make_worker):
    """instance(n_workers, **kwargs) -> registered workers 0..n-1 of a new instance,
    registered in reverse order (the fan-out must sort by worker id)."""
    def make(n=2, prefix="ctl", peer_base=None):
        inst = unique(prefix)
        workers = [make_worker(node, inst, i,
                               peer_init_url=None if peer_base is None else f"10.0.0.6:{peer_base + i}")
                   for i in range(n)]
        for w in reversed(workers):
            w.register()
        # A cluster (LMCC_TEST_CLUSTER=1) replicates registrations to the other
        # nodes after answering them: the commands below go through any node.
        for each in getattr(getattr(node, "cluster", None), "nodes", []):
            wait_until(lambda each=each: len(each.workers(inst)) == n,
                       message=f"{inst}'s {n} workers known at {each.http_url}")
        return workers
    return make


def received(w, type_name):
    return w.control.requests(type_name)


def test_clear(node, instance):
    ws = instance(2)
    r = node.post("/clear", {"instance_id": ws[0].instance_id, "location": LOCATION})
    assert r.status == 200, r
    body = r.json()
    assert list(body) == ["event_id", "num_tokens"]
    assert body["event_id"].startswith("Clear") and body["num_tokens"] == 7
    for w in ws:
        [m] = received(w, "ClearWorkerMsg")
        assert m == {"type": "ClearWorkerMsg",
                     "worker_event_id": f"Worker{w.worker_id}{body['event_id']}",
                     "location": LOCATION}
        assert list(m) == ["type", "worker_event_id", "location"]


def test_pin(node, instance):
    ws = instance(2)
    r = node.post("/pin", {"instance_id": ws[0].instance_id, "location": LOCATION,
                           "tokens": [1, 2, 3]})
    assert r.status == 200, r
    event_id = r.json()["event_id"]
    assert event_id.startswith("Pin") and r.json()["num_tokens"] == 7
    for w in ws:
        [m] = received(w, "PinWorkerMsg")
        assert m == {"type": "PinWorkerMsg", "worker_event_id": f"Worker{w.worker_id}{event_id}",
                     "location": LOCATION, "tokens": [1, 2, 3]}


@pytest.mark.parametrize("op", ["compress", "decompress"])
def test_compress_and_decompress(node, instance, op):
    ws = instance(2)
    cls = "CompressWorkerMsg" if op == "compress" else "DecompressWorkerMsg"
    prefix = "CompressWorker" if op == "compress" else "DecompressWorker"
    inst = ws[0].instance_id
    r = node.post(f"/{op}", {"instance_id": inst, "method": "cachegen", "location": LOCATION,
                             "tokens": [5, 6]})
    assert r.status == 200, r
    assert r.json()["event_id"].startswith(op.capitalize()) and r.json()["num_tokens"] == 7
    # tokens omitted -> [] (LMCache's default), null -> None.
    assert node.post(f"/{op}", {"instance_id": inst, "method": "m2", "location": LOCATION}).status == 200
    assert node.post(f"/{op}", {"instance_id": inst, "method": "m3", "location": LOCATION,
                                "tokens": None}).status == 200
    for w in ws:
        msgs = received(w, cls)
        assert [m["tokens"] for m in msgs] == [[5, 6], [], None]
        assert [m["method"] for m in msgs] == ["cachegen", "m2", "m3"]
        for m in msgs:
            assert list(m) == ["type", "worker_event_id", "method", "location", "tokens"]
            assert m["worker_event_id"].startswith(f"{prefix}{w.worker_id}")
            assert len(m["worker_event_id"]) > len(prefix) + 1
            assert m["location"] == LOCATION


def test_move(node, instance):
    src = instance(2, "src")
    dst = instance(2, "dst", peer_base=8200)
    r = node.post("/move", {"old_position": [src[0].instance_id, LOCATION],
                            "new_position": [dst[0].instance_id, "LocalDiskBackend"],
                            "tokens": [1, 2, 3], "should_copy": True})
    assert r.status == 200, r
    assert r.json()["event_id"].startswith("Move") and r.json()["num_tokens"] == 7
    for i, w in enumerate(src):
        [m] = received(w, "MoveWorkerMsg")
        assert list(m) == ["type", "worker_event_id", "old_position", "new_position", "tokens", "copy"]
        assert m["worker_event_id"].startswith(f"MoveWorker{i}")
        assert m["old_position"] == LOCATION
        assert m["new_position"] == [f"10.0.0.6:{8200 + i}", "LocalDiskBackend"]
        assert m["tokens"] == [1, 2, 3] and m["copy"] is True
    for w in dst:
        assert w.control.requests() == [], "commands go to the source workers only"

    # Defaults: tokens [], should_copy false.
    r = node.post("/move", {"old_position": [src[0].instance_id, LOCATION],
                            "new_position": [dst[0].instance_id, LOCATION]})
    assert r.status == 200, r
    m = received(src[0], "MoveWorkerMsg")[-1]
    assert m["tokens"] == [] and m["copy"] is False


def test_move_to_an_instance_without_peer_url_fails_clearly(node, instance):
    src = instance(1, "src")
    dst = instance(1, "dst-nopeer")
    r = node.post("/move", {"old_position": [src[0].instance_id, LOCATION],
                            "new_position": [dst[0].instance_id, LOCATION]})
    assert r.status == 500
    assert "peer_init_url" in r.json()["detail"]
    assert src[0].control.requests() == []


def test_health_codes_keyed_by_worker_id_string(node, instance):
    ws = instance(5)
    ws[1].control.health_code = 3
    ws[2].control.push(Error("engine broken"))                                  # -1001
    ws[3].control.push(Answer({"type": "ClearWorkerRetMsg", "num_tokens": 1}))  # -1002
    ws[4].control.push(Raw(b"\xc1"))                                            # -1003
    r = node.post("/health", {"instance_id": ws[0].instance_id})
    assert r.status == 200, r
    body = r.json()
    assert body["event_id"].startswith("health")
    assert body["error_codes"] == {"0": 0, "1": 3, "2": -1001, "3": -1002, "4": -1003}
    [m] = received(ws[0], "HealthWorkerMsg")
    assert m["worker_event_id"].startswith("HealthWorker0")
    # Unknown instance: no workers, success with no codes (as LMCache).
    r = node.post("/health", {"instance_id": unique("nobody")})
    assert r.status == 200 and r.json()["error_codes"] == {}


@pytest.mark.parametrize("path,body", [
    ("/clear", {"location": LOCATION}),
    ("/pin", {"location": LOCATION, "tokens": [1]}),
    ("/compress", {"method": "m", "location": LOCATION}),
    ("/decompress", {"method": "m", "location": LOCATION}),
])
def test_commands_to_an_unknown_instance_fail_clearly(node, path, body):
    r = node.post(path, {"instance_id": unique("nobody"), **body})
    assert r.status == 500
    assert "no registered workers" in r.json()["detail"]


def test_worker_error_and_disagreement_are_clear_500s(node, instance):
    ws = instance(2)
    inst = ws[0].instance_id
    ws[1].control.push(Error("Worker error: out of memory"))
    r = node.post("/clear", {"instance_id": inst, "location": LOCATION})
    assert r.status == 500
    detail = r.json()["detail"]
    assert "worker 1" in detail and "Worker error: out of memory" in detail

    ws[1].control.num_tokens = 8
    r = node.post("/pin", {"instance_id": inst, "location": LOCATION, "tokens": [1]})
    assert r.status == 500 and "disagree" in r.json()["detail"]
    ws[1].control.num_tokens = 7

    ws[0].control.push(Raw(b"\xc1"))
    r = node.post("/clear", {"instance_id": inst, "location": LOCATION})
    assert r.status == 500 and "undecodable" in r.json()["detail"]
    # The worker answered (badly); the next command on that socket is fine.
    assert node.post("/clear", {"instance_id": inst, "location": LOCATION}).status == 200


def test_worker_that_never_replies_costs_one_timeout(node, instance):
    [w] = instance(1)
    inst = w.instance_id
    w.control.push(Never())
    t0 = time.monotonic()
    r = node.post("/clear", {"instance_id": inst, "location": LOCATION})
    elapsed = time.monotonic() - t0
    assert r.status == 500, r
    assert f"did not answer within {CONTROL_TIMEOUT_MS}ms" in r.json()["detail"]
    assert TIMEOUT_S * 0.9 <= elapsed < TIMEOUT_S + 3, f"took {elapsed:.2f}s"
    assert w.control.rebinds == 1
    # Once the worker answers again, the next command to it succeeds (no wedged socket).
    r = node.post("/health", {"instance_id": inst})
    assert r.status == 200 and r.json()["error_codes"] == {"0": 0}
    assert len(received(w, "HealthWorkerMsg")) == 1


def test_health_reports_a_silent_worker_without_failing(node, instance):
    ws = instance(2)
    ws[1].control.push(Never())
    r = node.post("/health", {"instance_id": ws[0].instance_id})
    assert r.status == 200, r
    assert r.json()["error_codes"] == {"0": 0, "1": -1004}


def test_a_late_reply_is_never_taken_for_the_next_answer(node, instance):
    [w] = instance(1)
    inst = w.instance_id
    w.control.push(Slow(TIMEOUT_S + 0.3, {"type": "ClearWorkerRetMsg", "num_tokens": 111}))
    r = node.post("/clear", {"instance_id": inst, "location": LOCATION})
    assert r.status == 500 and "did not answer" in r.json()["detail"]
    # Let the fake finish its late reply, which the node must drop.
    wait_until(lambda: not w.control.busy, message="the slow reply to be sent")
    r = node.post("/clear", {"instance_id": inst, "location": LOCATION})
    assert r.status == 200, r
    assert r.json()["num_tokens"] == 7


def test_two_concurrent_commands_to_one_worker_are_queued(node, instance):
    [w] = instance(1)
    inst = w.instance_id
    # Each answer takes a while; the second command must wait its turn, not fail (EFSM).
    w.control.push(Slow(0.1, {"type": "ClearWorkerRetMsg", "num_tokens": 7}),
                   Slow(0.1, {"type": "PinWorkerRetMsg", "num_tokens": 7}))
    results = {}
    barrier = threading.Barrier(2)

    def call(name, path, body):
        barrier.wait()
        results[name] = node.post(path, body)

    threads = [threading.Thread(target=call, args=("clear", "/clear",
                                                   {"instance_id": inst, "location": LOCATION})),
               threading.Thread(target=call, args=("pin", "/pin",
                                                   {"instance_id": inst, "location": LOCATION,
                                                    "tokens": [1]}))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert results["clear"].status == 200, results["clear"]
    assert results["pin"].status == 200, results["pin"]
    assert sorted(m["type"] for m in w.control.requests()) == ["ClearWorkerMsg", "PinWorkerMsg"]


def test_orchestration_message_pushed_on_pull_is_executed(node, instance):
    [w] = instance(1)
    w.push({"type": "ClearMsg", "event_id": "pushed-1", "instance_id": w.instance_id,
            "location": LOCATION})
    wait_until(lambda: received(w, "ClearWorkerMsg"), message="the pushed ClearMsg to fan out")
    assert received(w, "ClearWorkerMsg")[0]["worker_event_id"] == "Worker0pushed-1"


def test_check_finish(node_factory, make_worker):
    # CheckFinishMsg names no instance: every registered worker is asked, so
    # this needs a node of its own.
    fresh = node_factory()
    r = fresh.post("/check_finish", {"event_id": "ev-0"})
    assert r.status == 500 and "no workers" in r.json()["detail"]
    x = make_worker(fresh, unique("cf-x"), 0)
    y = make_worker(fresh, unique("cf-y"), 1)
    x.register()
    y.register()
    r = fresh.post("/check_finish", {"event_id": "ev-1"})
    assert r.status == 200, r
    assert r.json() == {"status": "finished"}
    for w in (x, y):
        assert received(w, "CheckFinishWorkerMsg") == [
            {"type": "CheckFinishWorkerMsg", "worker_event_id": "ev-1"}]

    # A seed-era worker answers ErrorMsg: a clear 500.
    y.control.push(Error("Unknown message type CheckFinishWorkerMsg"))
    r = fresh.post("/check_finish", {"event_id": "ev-2"})
    assert r.status == 500, r
    detail = r.json()["detail"]
    assert "check_finish" in detail and "Unknown message type CheckFinishWorkerMsg" in detail

    assert fresh.post("/check_finish", {}).status == 422


def test_move_pairs_workers_by_sorted_id(node, instance):
    # zip(sorted src ids, sorted dst ids): a 2-worker source and a 1-worker
    # destination move only worker 0's share.
    src = instance(2, "src")
    dst = instance(1, "dst", peer_base=8300)
    r = node.post("/move", {"old_position": [src[0].instance_id, LOCATION],
                            "new_position": [dst[0].instance_id, LOCATION], "tokens": [9]})
    assert r.status == 200, r
    [m] = received(src[0], "MoveWorkerMsg")
    assert m["new_position"] == ["10.0.0.6:8300", LOCATION]
    assert src[1].control.requests() == []


def test_commands_to_a_worker_without_an_endpoint_time_out(node, make_worker):
    # Registered with a port nothing listens on: one timeout, a clear error.
    w = make_worker(node, unique("dead"), 0, control=False, port=9)
    w.register()
    t0 = time.monotonic()
    r = node.post("/pin", {"instance_id": w.instance_id, "location": LOCATION, "tokens": [1]})
    assert r.status == 500 and "did not answer" in r.json()["detail"]
    assert time.monotonic() - t0 < TIMEOUT_S + 3
    r = node.post("/health", {"instance_id": w.instance_id})
    assert r.status == 200 and r.json()["error_codes"] == {"0": -1004}


def test_deregistration_fails_a_waiting_command_at_once(node_factory, make_worker):
    node = node_factory("--control-timeout-ms", "30000")
    w = make_worker(node, unique("dereg-inflight"), 0)
    w.register()
    w.control.push(Never())
    result = {}

    def clear():
        t0 = time.monotonic()
        result["response"] = node.post("/clear", {"instance_id": w.instance_id, "location": LOCATION})
        result["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=clear)
    t.start()
    wait_until(lambda: received(w, "ClearWorkerMsg"), message="the command to reach the worker")
    w.deregister()
    t.join(timeout=20)
    assert result["response"].status == 500, result
    assert "deregistered" in result["response"].json()["detail"]
    assert result["elapsed"] < 10, "failed by the deregistration, not by the 30 s timeout"


@pytest.mark.xfail(strict=True, reason=(
    "known limitation: an HTTP handler blocks a thread of the fixed pool (--http-threads, "
    "default 32) while it waits for workers; as many admin commands to a dead worker as "
    "there are threads hold the whole pool for a control timeout each, so /lookup waits "
    "behind them -- in LMCache's async FastAPI a stuck command never delays other requests. "
    "The default pool is sized so that this needs 32 concurrent stuck commands"))
def test_lookup_is_not_held_up_by_commands_to_a_dead_worker(node_factory, make_worker):
    # Two HTTP threads keep the test short; with the default 8 it takes 8 commands.
    node = node_factory("--control-timeout-ms", "2000", "--http-threads", "2")
    dead = make_worker(node, unique("dead"), 0, control=False, port=9)
    dead.register()
    body = ('{"instance_id": "%s"}' % dead.instance_id).encode()
    request = (b"POST /health HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    conns = []
    try:
        for _ in range(2):  # as many as the node has HTTP threads
            s = socket.create_connection(("127.0.0.1", node.http_port), timeout=30)
            s.sendall(request)
            conns.append(s)
        t0 = time.monotonic()
        r = node.post("/lookup", {"tokens": [1, 2, 3]})
        elapsed = time.monotonic() - t0
        assert r.status == 200
        assert elapsed < 1.0, f"/lookup took {elapsed:.2f}s behind commands to a dead worker"
    finally:
        for s in conns:
            s.close()
