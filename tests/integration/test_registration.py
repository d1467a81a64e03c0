"""Registration, heartbeats, deregistration and the registry queries (spec 2.3, 4.7)."""

import pytest

from conftest import unique, unique_ip, wait_until
from lmcc_worker import deregister_msg


def full_sync_command(reason):
    return {"command_type": "full_sync", "reason": reason, "args": None}


@pytest.mark.single_node("expects the heartbeat port of the node it registered at (a cluster hands out the worker's home node's)")
def test_register_hands_out_bare_heartbeat_url(node, make_worker):
    w = make_worker(node, unique("reg"), 0, peer_init_url="127.0.0.1:8200")
    reply = w.register()
    # Exactly msgspec's RegisterRetMsg: tag first, then extra_config.
    assert list(reply) == ["type", "extra_config"]
    assert reply["extra_config"] == {"heartbeat_url": f"127.0.0.1:{node.heartbeat_port}"}
    assert "tcp://" not in reply["extra_config"]["heartbeat_url"]

    [info] = node.workers(w.instance_id)
    assert info["instance_id"] == w.instance_id
    assert info["worker_id"] == 0
    assert info["ip"] == w.ip
    assert info["port"] == w.port
    assert info["peer_init_url"] == "127.0.0.1:8200"
    assert info["registration_time"] > 0
    assert info["last_heartbeat_time"] == info["registration_time"]
    assert info["key_count"] == 0

    # The handed-out URL works: a heartbeat over it is answered.
    assert w.heartbeat()["type"] == "HeartbeatRetMsg"


def test_first_heartbeat_on_fresh_node_asks_controller_restart(node_factory, make_worker):
    fresh = node_factory()
    w = make_worker(fresh, unique("restart"), 0)
    w.register()
    reply = w.heartbeat()
    assert reply["commands"] == [full_sync_command("controller_restart")]
    # msgspec's layout of FullSyncCommand: tag field first.
    assert list(reply["commands"][0]) == ["command_type", "reason", "args"]
    # Without a full sync the node keeps asking.
    assert w.heartbeat()["commands"] == [full_sync_command("controller_restart")]


def test_a_worker_asked_on_every_heartbeat_is_not_logged_on_every_one(node_factory, make_worker):
    # A worker that never starts the sync it owes is asked on every heartbeat;
    # the log keeps its first ask, not a line per heartbeat (full_sync_ask_log.hpp).
    fresh = node_factory()
    w = make_worker(fresh, unique("asked"), 0)
    w.register()
    replies = [w.heartbeat() for _ in range(20)]
    assert all(r["commands"] == [full_sync_command("controller_restart")] for r in replies)

    def asks():
        return [line for line in fresh.log_text().splitlines()
                if "full-sync-requested" in line and w.instance_id in line]

    wait_until(lambda: asks(), message="the first ask in the log")
    # The directory answers the first heartbeat, the socket thread the rest:
    # each logs its first ask.
    assert len(asks()) <= 2, asks()


def test_heartbeat_of_unknown_worker_reregisters_it(node, make_worker):
    w = make_worker(node, unique("unknown-hb"), 3, peer_init_url="127.0.0.1:8203")
    assert node.workers(w.instance_id) == []
    reply = w.heartbeat()  # never registered: straight to the heartbeat port
    assert reply == {"type": "HeartbeatRetMsg",
                     "commands": [full_sync_command("worker_re_registered")]}
    [info] = node.workers(w.instance_id)
    assert (info["worker_id"], info["ip"], info["port"], info["peer_init_url"]) == \
        (3, w.ip, w.port, "127.0.0.1:8203")
    # Now known: the next heartbeat is an ordinary one (no re-registration).
    second = w.heartbeat()
    assert full_sync_command("worker_re_registered") not in second["commands"]
    assert len(node.workers(w.instance_id)) == 1


def test_heartbeat_is_also_accepted_on_the_reply_socket(node, make_worker):
    w = make_worker(node, unique("hb-on-reply"), 0)
    w.register()
    before = node.workers(w.instance_id)[0]["last_heartbeat_time"]
    reply = w.request(w.heartbeat_message())  # S2, not S3 (spec 4.1.2)
    assert reply["type"] == "HeartbeatRetMsg"
    wait_until(lambda: node.workers(w.instance_id)[0]["last_heartbeat_time"] > before,
               message="last_heartbeat_time to advance")


def test_register_twice_keeps_one_entry_and_clears_its_keys(node, make_worker):
    w = make_worker(node, unique("twice"), 0)
    other = make_worker(node, w.instance_id, 1)
    w.register()
    other.register()
    w.admit([11, 12, 13])
    w.admit([14], location="LocalDiskBackend")
    other.admit([21, 22])
    wait_until(lambda: node.key_count(w.instance_id, 0) == 4, message="4 keys for worker 0")
    wait_until(lambda: node.key_count(w.instance_id, 1) == 2, message="2 keys for worker 1")
    first_reg = node.workers(w.instance_id)[0]["registration_time"]

    reply = w.register()
    assert reply["type"] == "RegisterRetMsg"
    workers = node.workers(w.instance_id)
    assert [x["worker_id"] for x in workers] == [0, 1], "one entry per (instance, worker)"
    wait_until(lambda: node.key_count(w.instance_id, 0) == 0,
               message="worker 0's keys cleared by the duplicate registration")
    assert node.key_count(w.instance_id, 1) == 2, "the other worker keeps its keys"
    assert node.workers(w.instance_id)[0]["registration_time"] == first_reg

    # The worker restarted its seq counters: new batches apply normally.
    w.next_seq.clear()
    w.admit([15])
    wait_until(lambda: node.key_count(w.instance_id, 0) == 1, message="new key after re-registration")


def test_deregister_removes_worker_then_instance(node, make_worker):
    inst = unique("dereg")
    w0 = make_worker(node, inst, 0)
    w1 = make_worker(node, inst, 1)
    w0.register()
    w1.register()
    w0.admit([101, 102])
    w1.admit([103])
    wait_until(lambda: node.key_count(inst) == 3, message="3 keys")
    total_before = node.get("/controller/key-stats").json()["total_key_count"]

    w0.deregister()
    wait_until(lambda: [x["worker_id"] for x in node.workers(inst)] == [1], message="worker 0 gone")
    wait_until(lambda: node.get("/controller/key-stats").json()["total_key_count"] == total_before - 2,
               message="worker 0's keys gone from the index")

    w1.deregister()
    wait_until(lambda: node.get(f"/controller/workers?instance_id={inst}").status == 404,
               message="instance gone once its last worker left")
    r = node.post("/query_instance", {"event_id": "e", "ip": w1.ip})
    assert r.status == 404
    # Deregistering an unknown worker is only a warning: the node keeps serving.
    w1.push(deregister_msg(inst, 7, w1.ip, w1.port))
    assert node.get("/healthz").status == 200


@pytest.mark.single_node("counts the dropped batch on the node that decides it")
def test_batches_after_deregistration_are_dropped(node, make_worker):
    inst = unique("gone")
    w = make_worker(node, inst, 0)
    w.register()
    w.deregister()
    wait_until(lambda: node.workers(inst) == [], message="deregistered")
    before = node.event_count("batch_from_unknown_worker")
    w.admit([1, 2, 3])
    wait_until(lambda: node.event_count("batch_from_unknown_worker") == before + 1,
               message="batch from an unknown worker counted and dropped")
    assert node.workers(inst) == []


def test_query_instance(node, make_worker):
    inst = unique("qi")
    w = make_worker(node, inst, 0)
    w.register()
    r = node.post("/query_instance", {"event_id": "caller-id", "ip": w.ip})
    assert r.status == 200, r
    body = r.json()
    assert body["res"] == inst
    assert body["event_id"].startswith("QueryInst")

    r = node.post("/query_instance", {"event_id": "x", "ip": unique_ip()})
    assert r.status == 404
    assert r.content_type.startswith("application/json")
    assert "detail" in r.json() and r.json()["detail"]


def test_query_worker_info(node, make_worker):
    inst = unique("qwi")
    w1 = make_worker(node, inst, 1, peer_init_url="127.0.0.1:9001")
    w0 = make_worker(node, inst, 0)
    w1.register()  # registration order 1, 0: replies are sorted by worker id
    w0.register()

    status, body = node.post("/query_worker_info", {"instance_id": inst})
    assert status == 200, body
    assert body["event_id"].startswith("QueryWorkerInfo")
    infos = body["worker_infos"]
    assert [i["worker_id"] for i in infos] == [0, 1]
    assert list(infos[0]) == ["instance_id", "worker_id", "ip", "port", "peer_init_url",
                              "registration_time", "last_heartbeat_time"]
    assert infos[0]["ip"] == w0.ip and infos[0]["port"] == w0.port
    assert infos[0]["peer_init_url"] is None
    assert infos[1]["peer_init_url"] == "127.0.0.1:9001"

    status, body = node.post("/query_worker_info", {"instance_id": inst, "worker_ids": [1]})
    assert status == 200 and [i["worker_id"] for i in body["worker_infos"]] == [1]

    status, body = node.post("/query_worker_info", {"instance_id": inst, "worker_ids": [1, 9]})
    assert status == 200 and [i["worker_id"] for i in body["worker_infos"]] == [1]

    status, body = node.post("/query_worker_info", {"instance_id": "all", "worker_ids": []})
    assert status == 200
    mine = [i for i in body["worker_infos"] if i["instance_id"] == inst]
    assert sorted(i["worker_id"] for i in mine) == [0, 1]

    status, body = node.post("/query_worker_info", {"instance_id": unique("nobody")})
    assert status == 200 and body["worker_infos"] == []


def test_later_heartbeats_get_the_first_ones_answer_and_are_recorded(node, make_worker):
    # After its first heartbeat (stored by the directory) a worker's heartbeats
    # are answered on the socket thread from the registry's published view
    # (heartbeat_reader.hpp), or in a cluster by the worker's home: the same
    # answer, and each one's time is still recorded.
    w = make_worker(node, unique("hb-later"), 0)
    w.register()
    first = w.heartbeat()
    recorded = node.workers(w.instance_id)[0]["last_heartbeat_time"]
    assert [w.heartbeat() for _ in range(5)] == [first] * 5
    wait_until(lambda: node.workers(w.instance_id)[0]["last_heartbeat_time"] > recorded,
               message="last_heartbeat_time to advance after later heartbeats")


@pytest.mark.single_node("counts one node's heartbeats answered in place")
def test_heartbeats_after_the_first_are_answered_in_place(node, make_worker):
    w = make_worker(node, unique("hb-in-place"), 0)
    w.register()
    w.heartbeat()  # the first is stored: the directory answers it
    in_place = node.event_count("heartbeat_answered_in_place")
    for _ in range(5):
        w.heartbeat()
    assert node.event_count("heartbeat_answered_in_place") >= in_place + 5


def test_heartbeat_updates_last_heartbeat_time(node, make_worker):
    w = make_worker(node, unique("hbtime"), 0)
    w.register()
    reg = node.workers(w.instance_id)[0]
    w.heartbeat()
    wait_until(lambda: node.workers(w.instance_id)[0]["last_heartbeat_time"] > reg["registration_time"],
               message="last_heartbeat_time to move past registration_time")


def test_never_heartbeating_workers_are_kept_by_the_reaper(node_factory, make_worker):
    # Decisions table: only workers that heartbeated once and then went silent
    # past lmcache_worker_timeout are reaped.
    fresh = node_factory("--health-check-interval", "1", "--lmcache-worker-timeout", "1")
    silent = make_worker(fresh, unique("silent"), 0)
    beating = make_worker(fresh, unique("beating"), 0)
    silent.register()
    beating.register()
    beating.heartbeat()
    wait_until(lambda: fresh.workers(beating.instance_id) == [], timeout=15,
               message="the worker that heartbeated once and went silent to be reaped")
    assert len(fresh.workers(silent.instance_id)) == 1
    assert fresh.event_count("worker_deregistered") >= 1
    # A reaped worker comes back through its next heartbeat.
    reply = beating.heartbeat()
    assert reply["commands"] == [full_sync_command("worker_re_registered")]
    assert len(fresh.workers(beating.instance_id)) == 1


def test_query_instance_picks_the_first_registered_instance_of_an_ip(node, make_worker):
    ip = unique_ip()
    first = make_worker(node, unique("ip-first"), 0, ip=ip, control=False, port=5)
    second = make_worker(node, unique("ip-second"), 0, ip=ip, control=False, port=6)
    first.register()
    second.register()
    assert node.post("/query_instance", {"event_id": "e", "ip": ip}).json()["res"] == first.instance_id
    first.deregister()
    wait_until(lambda: node.post("/query_instance", {"event_id": "e", "ip": ip}).json().get("res")
               == second.instance_id, message="the second instance once the first left")


def test_reregistration_takes_the_new_address(node, make_worker):
    # lmcc's documented difference from LMCache (registry.hpp): a worker that
    # restarted on a new REP port is reachable at the new one.
    from lmcc_worker import ControlServer
    w = make_worker(node, unique("newport"), 0)
    w.register()
    assert node.post("/health", {"instance_id": w.instance_id}).json()["error_codes"] == {"0": 0}
    old = w.control
    w.control = ControlServer(w.ctx, w.ip)
    w.port = w.control.port
    try:
        w.register()
        old.health_code = 11
        w.control.health_code = 22
        r = node.post("/health", {"instance_id": w.instance_id})
        assert r.status == 200 and r.json()["error_codes"] == {"0": 22}
        assert node.workers(w.instance_id)[0]["port"] == w.port
    finally:
        old.close()


def _local_ip():
    # LMCache's rpc_utils.get_ip(): the source address towards 8.8.8.8, else loopback.
    import socket
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect(("8.8.8.8", 80))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


def test_heartbeat_url_for_a_bind_all_host(node_factory, make_worker):
    # spec 2.3: a bind-all host is turned into a connectable address.
    node = node_factory("--host", "0.0.0.0")
    here = _local_ip()
    local = make_worker(node, unique("hb-local"), 0, ip=here, control=False, port=5)
    remote = make_worker(node, unique("hb-remote"), 0, ip="203.0.113.7", control=False, port=5)
    assert local.request(local.register_message())["extra_config"] == \
        {"heartbeat_url": f"127.0.0.1:{node.heartbeat_port}"}
    assert remote.request(remote.register_message())["extra_config"] == \
        {"heartbeat_url": f"{here}:{node.heartbeat_port}"}


def test_heartbeat_url_honours_advertise_host(node_factory, make_worker):
    # spec 10: with an advertised host every worker, also a same-host one, gets it.
    node = node_factory("--host", "0.0.0.0", "--advertise-host", "lmcc.example")
    for ip in (_local_ip(), "203.0.113.8"):
        w = make_worker(node, unique("hb-adv"), 0, ip=ip, control=False, port=5)
        assert w.request(w.register_message())["extra_config"] == \
            {"heartbeat_url": f"lmcc.example:{node.heartbeat_port}"}
    # A specific bind host is handed out unchanged (spec 2.3 rule 3).
    node = node_factory("--advertise-host", "lmcc.example")
    w = make_worker(node, unique("hb-adv-specific"), 0, control=False, port=5)
    assert w.request(w.register_message())["extra_config"] == \
        {"heartbeat_url": f"127.0.0.1:{node.heartbeat_port}"}
