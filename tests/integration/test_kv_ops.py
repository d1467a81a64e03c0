"""Batched KV operations, seq tracking and the legacy single-op messages (spec 4.3)."""

from conftest import unique, wait_until
from lmcc_worker import LOCATION, legacy_kv_msg

DISK = "LocalDiskBackend"


def discontinuities(node) -> float:
    return node.gauge("kv_op_seq_discontinuity_count")


def test_admits_and_evicts_apply_in_order(node, make_worker):
    w = make_worker(node, unique("kv"), 0)
    w.register()
    w.admit(range(1000, 1010))
    w.evict([1000, 1001, 1002])
    # Admit and evict of the same key inside one batch: order decides.
    w.push(w.ops_message([("admit", 2000), ("evict", 2000), ("admit", 2001)]))
    wait_until(lambda: node.key_count(w.instance_id) == w.key_count() == 8,
               message="7 + 1 keys after admits/evicts")
    stats = node.get("/controller/key-stats").json()
    [mine] = [i for i in stats["instances"] if i["instance_id"] == w.instance_id]
    assert mine == {"instance_id": w.instance_id, "key_count": 8, "worker_count": 1}


def test_evicting_an_absent_key_is_a_noop(node, make_worker):
    w = make_worker(node, unique("kv-absent"), 0)
    w.register()
    w.admit([1, 2])
    # The absent key rides with a present one, so a dropped evict message
    # cannot pass: key 1 must go, key 999 changes nothing.
    w.evict([999, 1])
    w.admit([3])  # fence: applied after the evict
    wait_until(lambda: node.key_count(w.instance_id) == w.key_count() == 2, message="keys 2 and 3")


def test_locations_are_tracked_separately(node, make_worker):
    w = make_worker(node, unique("kv-loc"), 0)
    w.register()
    w.admit([5, 6], LOCATION)
    w.admit([5, 7], DISK)
    wait_until(lambda: node.key_count(w.instance_id) == 4, message="2 + 2 keys over two locations")
    w.evict([5], DISK)
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="key 5 left only in the CPU backend")


def test_full_range_integer_keys(node, make_worker):
    w = make_worker(node, unique("kv-range"), 0)
    w.register()
    # DESIGN.md: the index keys on the 64-bit pattern, so a signed and an unsigned
    # key with the same bits (-1 and 2**64-1) are one key; these all differ.
    keys = [-(2 ** 63), -1, 0, 2 ** 63 - 1, 2 ** 63 + 5, 2 ** 64 - 2, -1983622685967036160]
    w.admit(keys)
    wait_until(lambda: node.key_count(w.instance_id) == len(keys), message="all extreme keys held")
    w.evict([2 ** 64 - 2, -(2 ** 63)])
    wait_until(lambda: node.key_count(w.instance_id) == len(keys) - 2,
               message="a uint64 and the int64 min evicted")


def test_seq_gaps_count_once_per_batch(node, make_worker):
    w = make_worker(node, unique("seq"), 0)
    w.register()
    base = discontinuities(node)
    ops = lambda keys: [("admit", k) for k in keys]  # noqa: E731
    w.push(w.ops_message(ops([1, 2, 3]), seqs=[0, 1, 2]))         # first batch: initialises
    w.push(w.ops_message(ops([4, 5]), seqs=[3, 4]))               # continuous
    w.push(w.ops_message(ops([6, 7, 8]), seqs=[7, 8, 12]))        # two gaps, one batch -> +1
    w.push(w.ops_message(ops([9]), seqs=[13]))                    # continuous again
    w.push(w.ops_message(ops([10]), seqs=[20]))                   # gap -> +1
    # Another location has its own tracker: starting at 100 is not a gap.
    w.push(w.ops_message(ops([11]), DISK, seqs=[100]))
    w.push(w.ops_message(ops([12]), DISK, seqs=[101]))
    wait_until(lambda: node.key_count(w.instance_id) == 12, message="all 12 keys applied")
    wait_until(lambda: discontinuities(node) == base + 2, message="exactly 2 discontinuities")
    # Fence: one more continuous batch, then the counter must still say +2.
    w.push(w.ops_message(ops([13]), seqs=[21]))
    wait_until(lambda: node.key_count(w.instance_id) == 13, message="fence key")
    assert discontinuities(node) == base + 2

    # Per (worker, location): another worker starting at its own seq 0 is no gap.
    w2 = make_worker(node, w.instance_id, 1)
    w2.register()
    w2.admit([50, 51])
    w2.admit([52])
    wait_until(lambda: node.key_count(w.instance_id, 1) == 3, message="worker 1's keys")
    assert discontinuities(node) == base + 2


def test_evict_batches_are_seq_tracked_too(node, make_worker):
    w = make_worker(node, unique("seq-evict"), 0)
    w.register()
    base = discontinuities(node)
    w.push(w.ops_message([("admit", 1), ("admit", 2)], seqs=[0, 1]))
    w.push(w.ops_message([("evict", 1)], seqs=[5]))  # gap on an evict
    w.push(w.ops_message([("admit", 3)], seqs=[6]))
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="keys 2 and 3")
    wait_until(lambda: discontinuities(node) == base + 1, message="1 discontinuity")


def test_legacy_single_op_messages_are_applied(node, make_worker):
    w = make_worker(node, unique("legacy"), 0)
    w.register()
    w.push(legacy_kv_msg("KVAdmitMsg", w.instance_id, 0, 71, LOCATION, 0),
           legacy_kv_msg("KVAdmitMsg", w.instance_id, 0, 72, LOCATION, 1),
           legacy_kv_msg("KVAdmitMsg", w.instance_id, 0, 73, DISK, 0))
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="3 legacy admits")
    w.push(legacy_kv_msg("KVEvictMsg", w.instance_id, 0, 71, LOCATION, 2))
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="legacy evict applied")
    # seq_num may be omitted (default 0).
    w.push({"type": "KVAdmitMsg", "instance_id": w.instance_id, "worker_id": 0, "key": 74,
            "location": DISK})
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="legacy admit without seq_num")


def test_one_multipart_of_many_batches(node, make_worker):
    w = make_worker(node, unique("multi"), 0)
    w.register()
    # What a worker's push loop does: up to 50 queued WorkerMsgs in one multipart.
    msgs = [w.ops_message([("admit", 10_000 + i * 10 + j) for j in range(10)]) for i in range(50)]
    w.push(*msgs)
    wait_until(lambda: node.key_count(w.instance_id) == 500, message="500 keys from one multipart")
    assert node.get("/controller/key-stats").status == 200


def test_empty_batch_is_ignored(node, make_worker):
    w = make_worker(node, unique("empty"), 0)
    w.register()
    base = discontinuities(node)
    w.push(w.ops_message([("admit", 1)], seqs=[0]))
    w.push(w.ops_message([], seqs=[]))
    w.push(w.ops_message([("admit", 2)], seqs=[1]))
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="2 keys")
    assert discontinuities(node) == base
