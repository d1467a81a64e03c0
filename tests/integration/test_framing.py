"""Socket-level robustness (spec 2.2, 3.2, 4.1, decisions table): pipelined requests,
bad frames mixed with good ones, bad requests, JSON frames, oversized frames."""

import json

import msgpack
import zmq

import pytest

from conftest import unique, wait_until
from lmcc_worker import (LOCATION, FakeWorker, batched_kv_msg, heartbeat_msg, kv_op, pack,
                         p2p_lookup_msg, register_msg, unpack)

BAD_FRAMES = [b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", b"{not json", b"\xff\xfe\xfd"]


def bad_frames(node) -> float:
    return node.metrics().get("lmcc_frontend_bad_frames_total", 0.0)


def test_pipelined_requests_from_one_dealer_are_answered_in_order(node, make_worker):
    holder = make_worker(node, unique("pipe-holder"), 0, peer_init_url="127.0.0.1:7000")
    holder.register()
    hashes = [10_000_000 + i for i in range(3)]
    holder.admit(hashes)
    wait_until(lambda: node.key_count(holder.instance_id) == 3, message="3 keys")

    w = make_worker(node, unique("pipe"), 0)
    sock = w.req_sock
    big = p2p_lookup_msg(hashes + list(range(1, 200_000)), w.instance_id, 0)  # slow to handle
    requests = [
        pack(big),
        b"\xff\xfe\xfd",                                  # bad: answered with ErrorMsg in place
        pack(w.register_message()),                       # fast
        pack(w.heartbeat_message()),
        pack({"type": "FullSyncStartMsg", "instance_id": "nobody", "worker_id": 0,
              "location": LOCATION, "sync_id": "s", "total_keys": 1, "batch_count": 1}),
    ]
    # Then many small lookups whose answers differ (1, 2 or 3 hits).
    counts = [1 + i % 3 for i in range(30)]
    requests += [pack(p2p_lookup_msg(hashes[:k], w.instance_id, 0)) for k in counts]
    for payload in requests:  # all sent before the first receive
        sock.send_multipart([b"", payload])
    replies = [w.recv_reply() for _ in requests]

    assert [r["type"] for r in replies[:5]] == ["BatchedP2PLookupRetMsg", "ErrorMsg",
                                                "RegisterRetMsg", "HeartbeatRetMsg",
                                                "FullSyncStartRetMsg"]
    assert replies[0]["layout_info"] == [[holder.instance_id, LOCATION, 3, "127.0.0.1:7000"]]
    assert [r["layout_info"][0][2] for r in replies[5:]] == counts
    sock.setsockopt(zmq.RCVTIMEO, 200)
    try:
        extra = sock.recv_multipart()
    except zmq.Again:
        extra = None
    assert extra is None, "exactly one reply per request"


@pytest.mark.single_node("counts dropped frames on the node that read them")
def test_bad_frames_mixed_with_good_ones_in_one_multipart(node, make_worker):
    w = make_worker(node, unique("mixed"), 0)
    w.register()
    before_bad = bad_frames(node)
    before_frames = node.gauge("pull_socket_message_count")
    good = w.ops_message([("admit", 1), ("admit", 2)])
    w.push_frames([*BAD_FRAMES, pack(good)])
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="the good frame applied")
    wait_until(lambda: bad_frames(node) == before_bad + 3, message="3 bad frames counted")
    assert node.gauge("pull_socket_message_count") >= before_frames + 4
    # Good frame first, bad ones after: the loop keeps going.
    w.push_frames([pack(w.ops_message([("admit", 3)])), *BAD_FRAMES,
                   pack(w.ops_message([("admit", 4)]))])
    wait_until(lambda: node.key_count(w.instance_id) == 4, message="frames around bad ones applied")
    assert node.get("/healthz").status == 200
    assert "pull-bad-frame" in node.log_text()


def test_undecodable_and_wrong_family_frames_on_pull(node, make_worker):
    w = make_worker(node, unique("pull-family"), 0)
    w.register()
    stranger = unique("pushed-register")
    w.push(register_msg(stranger, 0, "127.0.0.1", 1, None),          # request family: ignored
           {"type": "NoSuchMsg", "instance_id": "x"},                  # unknown type
           {"type": "WorkerMsg"},                                      # abstract base
           {"instance_id": w.instance_id, "worker_id": 0},             # no type
           [1, 2, 3],                                                  # not a map
           w.ops_message([("admit", 5)]))
    wait_until(lambda: node.key_count(w.instance_id) == 1, message="the good frame applied")
    assert node.workers(stranger) == [], "RegisterMsg over PUSH does not register"


def test_bad_request_on_router_gets_error_then_next_is_answered(node, make_worker):
    w = make_worker(node, unique("router-bad"), 0)
    cases = [
        b"\xff\xfe\xfd",
        b"{not json",
        b"",
        pack({"type": "NoSuchMsg"}),
        pack({"instance_id": "x"}),
        pack({"type": "RegisterMsg", "instance_id": "x", "worker_id": 0, "ip": "1.2.3.4",
              "port": 1}),                                           # peer_init_url is required
        pack({"type": "RegisterMsg", "instance_id": "x", "worker_id": "zero", "ip": "1.2.3.4",
              "port": 1, "peer_init_url": None}),                    # wrong field type
        pack({"type": "LookupMsg", "event_id": "e", "tokens": [1]}),  # orchestration family
        pack(batched_kv_msg("x", 0, LOCATION, [])),                  # push family
    ]
    for payload in cases:
        w.req_sock.send_multipart([b"", payload])
        reply = w.recv_reply()
        assert reply["type"] == "ErrorMsg", (payload, reply)
        assert list(reply) == ["type", "error"]
        assert reply["error"], f"empty error text for {payload!r}"
        # The next request on the same DEALER is answered normally.
        assert w.request(p2p_lookup_msg([], w.instance_id, 0))["type"] == "BatchedP2PLookupRetMsg"
    reply = w.request({"type": "LookupMsg", "event_id": "e", "tokens": [1]})
    assert reply["error"].startswith("Unknown message type")
    assert w.register()["type"] == "RegisterRetMsg"


def test_heartbeat_socket_accepts_only_heartbeats(node, make_worker):
    w = make_worker(node, unique("hb-only"), 0)
    w.register()
    hb = w._dealer(node.heartbeat_url)
    try:
        reply = w.request(w.register_message(), hb)
        assert reply == {"type": "ErrorMsg", "error": "Expected HeartbeatMsg, got RegisterMsg"}
        hb.send_multipart([b"", b"\xff"])
        assert w.recv_reply(hb)["type"] == "ErrorMsg"
        assert w.request(w.heartbeat_message(), hb)["type"] == "HeartbeatRetMsg"
    finally:
        hb.close(0)


def test_router_frame_layouts(node, make_worker):
    w = make_worker(node, unique("frames"), 0)
    sock = w.req_sock
    # [payload] only: ROUTER sees [identity, payload] (2 frames), accepted (spec 10).
    sock.send_multipart([pack(w.register_message())])
    frames = sock.recv_multipart()
    assert frames[0] == b"" and unpack(frames[-1])["type"] == "RegisterRetMsg"
    # Extra frames: the payload is the last one.
    sock.send_multipart([b"", b"ignored", pack(w.heartbeat_message())])
    assert w.recv_reply()["type"] == "HeartbeatRetMsg"
    # A plain REQ client works too.
    req = w.ctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.setsockopt(zmq.RCVTIMEO, 10_000)
    req.connect(f"tcp://{node.reply_url}")
    try:
        req.send(pack(p2p_lookup_msg([], w.instance_id, 0)))
        assert unpack(req.recv())["type"] == "BatchedP2PLookupRetMsg"
    finally:
        req.close(0)


def test_json_frames(node, make_worker):
    w = make_worker(node, unique("json"), 0)
    # RegisterMsg as JSON on the DEALER, tag not first; the reply is msgpack.
    reg = {"instance_id": w.instance_id, "worker_id": 0, "ip": w.ip, "port": w.port,
           "peer_init_url": None, "type": "RegisterMsg"}
    w.req_sock.send_multipart([b"", json.dumps(reg).encode()])
    reply = w.recv_reply()
    assert reply["type"] == "RegisterRetMsg"
    # Through a cluster the next HTTP call may reach a node the registration's
    # replica is still on its way to (registrations replicate asynchronously).
    wait_until(lambda: len(node.workers(w.instance_id)) == 1, message="the registration is listed")

    # A batch as JSON text on PUSH, next to a msgpack one in the same multipart.
    batch = batched_kv_msg(w.instance_id, 0, LOCATION,
                           [kv_op("admit", 31, 0), kv_op("admit", -32, 1)])
    w.push_frames([json.dumps(batch).encode(), pack(w.ops_message([("admit", 33)], seqs=[2]))])
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="JSON and msgpack batches applied")

    # Heartbeat as JSON on the heartbeat socket; unknown fields are ignored.
    hb = dict(heartbeat_msg(w.instance_id, 0, w.ip, w.port), extra_field={"x": [1]})
    hb_sock = w._dealer(node.heartbeat_url)
    try:
        hb_sock.send_multipart([b"", json.dumps(hb).encode()])
        assert w.recv_reply(hb_sock)["type"] == "HeartbeatRetMsg"
    finally:
        hb_sock.close(0)

    # msgpack with the tag last and an unknown field.
    odd = {"hashes": [], "instance_id": w.instance_id, "worker_id": 0, "zzz": 1,
           "type": "BatchedP2PLookupMsg"}
    w.req_sock.send_multipart([b"", msgpack.packb(odd, use_bin_type=True)])
    assert w.recv_reply()["type"] == "BatchedP2PLookupRetMsg"


def test_oversized_frames(node_factory, make_worker):
    node = node_factory("--max-frame-bytes", "4096")
    w = make_worker(node, unique("big"), 0)
    w.register()
    # ROUTER: refused with an ErrorMsg naming the limit; the next request is answered.
    big_reg = register_msg(w.instance_id, 1, w.ip, w.port, "x" * 5000)
    reply = w.request(big_reg)
    assert reply["type"] == "ErrorMsg"
    assert "4096" in reply["error"], reply
    assert [x["worker_id"] for x in node.workers(w.instance_id)] == [0]
    assert w.request(p2p_lookup_msg([], w.instance_id, 0))["type"] == "BatchedP2PLookupRetMsg"
    big_json = json.dumps(big_reg).encode()
    w.req_sock.send_multipart([b"", big_json])
    assert w.recv_reply()["type"] == "ErrorMsg"

    # Far beyond the limit (over twice it), libzmq itself refuses the frame and
    # drops that connection before buffering it; the worker's DEALER
    # reconnects, and nothing else is disturbed.
    other = make_worker(node, unique("big-other"), 0)
    other.register()
    w.req_sock.send_multipart([b"", b"\x80" * 9000])
    assert other.request(p2p_lookup_msg([], other.instance_id, 0))["type"] == \
        "BatchedP2PLookupRetMsg"

    # PUSH: the oversized frame is dropped, the loop goes on with the next frames.
    before = bad_frames(node)
    huge = w.ops_message([("admit", 50_000 + i) for i in range(150)])
    assert 4096 < len(pack(huge)) < 8192  # over the decoder's limit, under libzmq's
    w.push_frames([pack(huge), pack(w.ops_message([("admit", 1)]))])
    w.push(w.ops_message([("admit", 2)]))
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="frames after the oversized one")
    wait_until(lambda: bad_frames(node) == before + 1, message="the oversized frame counted")
    assert node.key_count(w.instance_id) == 2, "nothing of the oversized batch applied"
    # Over libzmq's limit the whole multipart is refused with the connection;
    # the PUSH socket reconnects and later frames arrive. Bytes already on the
    # cut connection behind the big frame are lost with it (as with any TCP
    # cut), so the worker keeps pushing until one arrives after the reconnect.
    w.push_frames([b"\x80" * 9000])

    def pushed_after_the_cut() -> bool:
        w.push(w.ops_message([("admit", 3)]))
        try:
            return wait_until(lambda: node.key_count(w.instance_id) == 3, timeout=0.5)
        except AssertionError:
            return False
    wait_until(pushed_after_the_cut, message="a frame after the cut")
    # Just under the limit still works.
    ok = w.ops_message([("admit", 60_000 + i) for i in range(100)])
    assert len(pack(ok)) < 4096
    w.push(ok)
    wait_until(lambda: node.key_count(w.instance_id) == 103, message="a large but allowed batch")


@pytest.mark.single_node("reads one node's socket counters")
def test_socket_counters(node, make_worker):
    w = make_worker(node, unique("counters"), 0)
    before_pull = node.gauge("pull_socket_message_count")
    before_reply = node.gauge("reply_socket_message_count")
    w.register()
    w.heartbeat()
    w.push(w.ops_message([("admit", 1)]), w.ops_message([("admit", 2)]))
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="2 keys")
    assert node.gauge("pull_socket_message_count") == before_pull + 2
    assert node.gauge("reply_socket_message_count") == before_reply + 2
    assert node.gauge("pull_socket_active_requests") == 0
    wait_until(lambda: node.gauge("reply_socket_active_requests") == 0, message="no request in flight")


def test_several_workers_pushing_at_once(node):
    # Eight workers, each with its own PUSH socket, feeding the one PULL socket.
    workers = [FakeWorker(node, unique("many"), 0, ip=f"127.0.9.{i + 2}", control=False)
               for i in range(8)]
    try:
        for w in workers:
            w.register()
        for w in workers:
            for chunk in range(5):
                w.admit([chunk * 100 + j for j in range(10)])
        for w in workers:
            wait_until(lambda w=w: node.key_count(w.instance_id) == 50, message=f"{w.instance_id} keys")
    finally:
        for w in workers:
            w.close()


@pytest.mark.single_node("counts dropped frames on the node that read them")
def test_multipart_frame_limit(node, make_worker):
    # At most 1024 frames of one PULL multipart are handled; the rest are counted
    # and dropped (a worker sends at most 50).
    w = make_worker(node, unique("frame-limit"), 0)
    w.register()
    before = bad_frames(node)
    w.push_frames([pack(w.ops_message([("admit", i)])) for i in range(1030)])
    wait_until(lambda: node.key_count(w.instance_id) == 1024, message="the first 1024 frames applied")
    wait_until(lambda: bad_frames(node) == before + 6, message="6 frames dropped and counted")
    w.push(w.ops_message([("admit", 5000)]))
    wait_until(lambda: node.key_count(w.instance_id) == 1025, message="the next multipart applied")
