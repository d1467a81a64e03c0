"""/lookup with real token lists (multi-holder, spec 4.4 + 10) and the TP-aware
BatchedP2PLookupMsg (spec 4.6 + 10)."""

import itertools

from conftest import unique, wait_until
from lmcc_worker import LOCATION, chunk_hashes

DISK = "LocalDiskBackend"
MISS = [["", "", 0, ""]]

_token_base = itertools.count(1)


def prompt(n_tokens: int) -> list[int]:
    """Token ids no other test uses, so their chunk hashes are unique to the test."""
    base = next(_token_base) * 1_000_000
    return list(range(base, base + n_tokens))


def test_hashes_match_the_spec_vectors():
    # spec 4.4.1, NONE_HASH 0, tokens 0..599: the fake worker hashes as LMCache does.
    assert chunk_hashes(list(range(600))) == [3131758554629441992, 8783757053568497755,
                                              4356085038892181893]


def test_lookup_hits_admitted_chunks(node, make_worker):
    w = make_worker(node, unique("lk"), 0)
    w.register()
    tokens = prompt(600)  # chunks (0,256), (256,512), (512,600)
    w.admit_tokens(tokens)
    wait_until(lambda: node.key_count(w.instance_id) == 3, message="3 chunk keys")

    r = node.post("/lookup", {"tokens": tokens})
    assert r.status == 200, r
    body = r.json()
    assert body["event_id"].startswith("Lookup")
    assert body["layout_info"] == {w.instance_id: [LOCATION, 600]}
    # A prefix of the prompt: chunk (256,300) hashes differently from (256,512).
    assert node.lookup(tokens[:300]) == {w.instance_id: [LOCATION, 256]}
    assert node.lookup(tokens[:256]) == {w.instance_id: [LOCATION, 256]}
    # A prompt that diverges in chunk 1.
    assert node.lookup(tokens[:256] + [7] * 256) == {w.instance_id: [LOCATION, 256]}
    assert node.lookup(prompt(512)) == {}
    assert node.lookup([]) == {}


def test_lookup_contiguous_prefix_only(node, make_worker):
    w = make_worker(node, unique("lk-gap"), 0)
    w.register()
    tokens = prompt(768)
    h = chunk_hashes(tokens)
    w.admit([h[0], h[2]])  # chunk 1 missing: the walk stops there
    wait_until(lambda: node.key_count(w.instance_id) == 2, message="2 keys")
    assert node.lookup(tokens) == {w.instance_id: [LOCATION, 256]}


def test_multi_holder_lookup(node, make_worker):
    tokens = prompt(768)
    h = chunk_hashes(tokens)
    a = make_worker(node, unique("A"), 0)
    b = make_worker(node, unique("B"), 0)
    c = make_worker(node, unique("C"), 0)
    for w in (a, b, c):  # registration order A, B, C
        w.register()
    a.admit(h[0:3])
    b.admit(h[0:2])
    c.admit(h[2:3])  # suffix-only holder: never credited
    wait_until(lambda: (node.key_count(a.instance_id), node.key_count(b.instance_id),
                        node.key_count(c.instance_id)) == (3, 2, 1), message="3/2/1 keys")
    layout = node.lookup(tokens)
    assert list(layout.items()) == [(a.instance_id, [LOCATION, 768]),
                                    (b.instance_id, [LOCATION, 512])]


def test_multi_holder_first_entry_is_first_registered_chunk0_holder(node, make_worker):
    tokens = prompt(768)
    h = chunk_hashes(tokens)
    c = make_worker(node, unique("C"), 0)
    b = make_worker(node, unique("B"), 0)
    a = make_worker(node, unique("A"), 0)
    for w in (c, b, a):  # registration order C, B, A
        w.register()
    a.admit(h[0:3])
    b.admit(h[0:2], DISK)
    c.admit(h[1:3])  # holds chunks 1-2 but not 0: no credit
    wait_until(lambda: (node.key_count(a.instance_id), node.key_count(b.instance_id),
                        node.key_count(c.instance_id)) == (3, 2, 2), message="3/2/2 keys")
    layout = node.lookup(tokens)
    assert list(layout.items()) == [(b.instance_id, [DISK, 512]),
                                    (a.instance_id, [LOCATION, 768])]


def test_lookup_after_evict_and_deregister(node, make_worker):
    tokens = prompt(512)
    h = chunk_hashes(tokens)
    a = make_worker(node, unique("A"), 0)
    b = make_worker(node, unique("B"), 0)
    a.register()
    b.register()
    a.admit(h)
    b.admit(h)
    wait_until(lambda: len(node.lookup(tokens)) == 2, message="two holders")
    a.evict([h[1]])
    wait_until(lambda: node.lookup(tokens) == {a.instance_id: [LOCATION, 256],
                                               b.instance_id: [LOCATION, 512]},
               message="A credited with chunk 0 only")
    a.deregister()
    wait_until(lambda: node.lookup(tokens) == {b.instance_id: [LOCATION, 512]},
               message="A gone from the layout")


def test_lookup_with_tp_workers_of_one_instance(node, make_worker):
    inst = unique("tp")
    w0 = make_worker(node, inst, 0)
    w1 = make_worker(node, inst, 1)
    w0.register()
    w1.register()
    tokens = prompt(1024)
    h = chunk_hashes(tokens)
    w0.admit(h)
    w1.admit(h[:2])
    wait_until(lambda: node.key_count(inst) == 6, message="4 + 2 keys")
    assert node.lookup(tokens) == {inst: [LOCATION, 1024]}


def test_long_prompt_lookup(node, make_worker):
    w = make_worker(node, unique("long"), 0)
    w.register()
    tokens = prompt(256 * 400)
    hashes = w.admit_tokens(tokens)
    wait_until(lambda: node.key_count(w.instance_id) == len(hashes), message="400 keys")
    assert node.lookup(tokens) == {w.instance_id: [LOCATION, len(tokens)]}
    assert node.lookup(tokens[:-1]) == {w.instance_id: [LOCATION, 256 * 399]}


# -- BatchedP2PLookupMsg --------------------------------------------------------------------


def tp_instance(node, make_worker, prefix, tp=2, with_peer=True, port_base=9100):
    inst = unique(prefix)
    workers = []
    for rank in range(tp):
        peer = f"127.0.0.1:{port_base + rank}" if with_peer else None
        w = make_worker(node, inst, rank, peer_init_url=peer)
        w.register()
        workers.append(w)
    return workers


def test_p2p_lookup_is_tp_aware(node, make_worker):
    p = tp_instance(node, make_worker, "P", port_base=9100)
    q = tp_instance(node, make_worker, "Q", port_base=9200)
    hashes = chunk_hashes(prompt(1024))
    for w in p:
        w.admit(hashes[:3])
    wait_until(lambda: node.key_count(p[0].instance_id) == 6, message="P holds 3 chunks per rank")

    # The asker's rank picks the peer's rank.
    assert q[1].p2p_lookup(hashes) == [[p[0].instance_id, LOCATION, 3, "127.0.0.1:9101"]]
    assert q[0].p2p_lookup(hashes) == [[p[0].instance_id, LOCATION, 3, "127.0.0.1:9100"]]
    # The asker's own instance is excluded.
    assert p[1].p2p_lookup(hashes) == MISS
    # Misses.
    assert q[1].p2p_lookup([]) == MISS
    assert q[1].p2p_lookup(chunk_hashes(prompt(256))) == MISS
    assert q[1].p2p_lookup([hashes[3]] + hashes[:3]) == MISS, "only a leading run counts"


def test_p2p_lookup_counts_the_peers_own_contiguous_run(node, make_worker):
    p = tp_instance(node, make_worker, "P", port_base=9300)
    q = tp_instance(node, make_worker, "Q", port_base=9400)
    hashes = chunk_hashes(prompt(1280))
    p[0].admit(hashes[:4])
    p[1].admit([hashes[0], hashes[1], hashes[3]])  # rank 1 lacks chunk 2
    wait_until(lambda: node.key_count(p[0].instance_id) == 7, message="4 + 3 keys")
    assert q[0].p2p_lookup(hashes) == [[p[0].instance_id, LOCATION, 4, "127.0.0.1:9300"]]
    assert q[1].p2p_lookup(hashes) == [[p[0].instance_id, LOCATION, 2, "127.0.0.1:9301"]]


def test_p2p_lookup_ignores_other_ranks(node, make_worker):
    # Only rank 0 of R holds the chunks: a rank-1 asker gets nothing (spec 10).
    r = tp_instance(node, make_worker, "R", port_base=9500)
    q = tp_instance(node, make_worker, "Q", port_base=9600)
    hashes = chunk_hashes(prompt(512))
    r[0].admit(hashes)
    wait_until(lambda: node.key_count(r[0].instance_id) == 2, message="2 keys")
    assert q[1].p2p_lookup(hashes) == MISS
    assert q[0].p2p_lookup(hashes) == [[r[0].instance_id, LOCATION, 2, "127.0.0.1:9500"]]


def test_p2p_lookup_first_peer_in_registration_order(node, make_worker):
    first = tp_instance(node, make_worker, "first", tp=1, port_base=9700)
    second = tp_instance(node, make_worker, "second", tp=1, port_base=9800)
    asker = tp_instance(node, make_worker, "asker", tp=1, port_base=9900)
    hashes = chunk_hashes(prompt(768))
    second[0].admit(hashes)
    first[0].admit(hashes[:1])
    wait_until(lambda: node.key_count(first[0].instance_id) == 1
               and node.key_count(second[0].instance_id) == 3, message="keys")
    # The first holder of hashes[0] in registration order is chosen, even though
    # the second one would have more hits (LMCache find_kv semantics).
    assert asker[0].p2p_lookup(hashes) == [[first[0].instance_id, LOCATION, 1, "127.0.0.1:9700"]]


def test_p2p_lookup_peer_without_peer_init_url_is_a_miss(node, make_worker):
    nopeer = tp_instance(node, make_worker, "nopeer", tp=1, with_peer=False)
    asker = tp_instance(node, make_worker, "asker", tp=1, port_base=9950)
    hashes = chunk_hashes(prompt(256))
    nopeer[0].admit(hashes)
    wait_until(lambda: node.key_count(nopeer[0].instance_id) == 1, message="key")
    assert asker[0].p2p_lookup(hashes) == MISS


def test_p2p_reply_wire_layout(node, make_worker):
    asker = tp_instance(node, make_worker, "wire", tp=1, port_base=9990)
    reply = asker[0].request({"type": "BatchedP2PLookupMsg", "hashes": [],
                              "instance_id": asker[0].instance_id, "worker_id": 0})
    # msgspec: tag first, a list of 4-tuples.
    assert list(reply) == ["type", "layout_info"]
    assert reply == {"type": "BatchedP2PLookupRetMsg", "layout_info": MISS}


def test_lookup_hashing_options_and_int_edge_cases(node_factory, make_worker):
    # --python-hash-seed 0: NONE_HASH = hash("0") under PYTHONHASHSEED=0 (spec 4.4.1).
    none_hash = 5313149338359954478
    assert chunk_hashes(list(range(600)), none_hash) == [6847123751949154252, -782556766413655621,
                                                         668996179211929659]
    node = node_factory("--python-hash-seed", "0", "--chunk-size", "4")
    w = make_worker(node, unique("hashopt"), 0)
    w.register()
    # hash(-1) == -2, and ints at or past 2**61-1 wrap (CPython's int hash).
    tokens = [-1, -2, 2 ** 61 - 1, 2 ** 61, 2 ** 63 - 1, -(2 ** 63), 2 ** 64 - 1, 2 ** 63,
              0, 1, -(2 ** 61) + 1, 12345678901234567, 5, 6]
    hashes = chunk_hashes(tokens, none_hash, chunk_size=4)
    assert len(hashes) == 4
    w.admit(hashes)
    wait_until(lambda: node.key_count(w.instance_id) == 4, message="4 keys")
    assert node.lookup(tokens) == {w.instance_id: [LOCATION, 14]}
    assert node.lookup(tokens[:9]) == {w.instance_id: [LOCATION, 8]}
