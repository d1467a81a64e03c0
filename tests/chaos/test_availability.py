"""The chaos checker's invariant 6 (availability.py): placement computed as
the nodes compute it, and the rule that judges each lookup -- what a fence
verified and nobody touched since is required, a lookup short of it fails
unless every owner of the missing chunk was unreachable from the node asked
within the failure detector's window. No cluster (test_owners_live.py runs
the placement against one)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from availability import CHUNK, Availability, Ring, fnv1a, mix64, slot_of  # noqa: E402


def test_hashes_match_the_values_the_cpp_tests_pin():
    # tests/cluster/hash_test.cpp
    assert mix64(1) == 6238072747940578789
    assert fnv1a() == 17665956581633026203
    assert fnv1a("") == 9313164154874788883
    assert fnv1a("n1", 0) == 3214113037083475810
    assert fnv1a("n2", 1023) == 12187959533730429644


def test_preference_lists_match_the_values_the_cpp_tests_pin():
    # tests/cluster/ring_test.cpp, n1..n4 at 1024 virtual nodes and 4096 slots.
    ring = Ring(["n4", "n2", "n1", "n3"])
    assert ring.preference(0) == ["n1", "n2", "n4", "n3"]
    assert ring.preference(1) == ["n2", "n4", "n1", "n3"]
    assert ring.preference(1000) == ["n2", "n4", "n3", "n1"]
    assert ring.preference(2047) == ["n4", "n2", "n1", "n3"]
    assert ring.preference(4095) == ["n1", "n2", "n4", "n3"]


def test_owners_are_the_first_r_members_of_the_preference_list():
    ring = Ring(["n1", "n2", "n3", "n4"])  # n4 configured as a standby: on the ring, owning nothing
    members = {"n1", "n2", "n3"}
    for slot in range(0, 4096, 97):
        assert ring.owners(slot, members) == [n for n in ring.preference(slot) if n != "n4"][:2]
    counts = ring.slot_counts(members)
    assert sum(p for p, _ in counts.values()) == 4096
    assert sum(r for _, r in counts.values()) == 4096
    assert ring.owners(0, {"n1", "n2", "n3", "n4"}) == ["n1", "n2"]
    assert ring.owners(1, {"n1", "n2", "n3", "n4"}) == ["n2", "n4"]


def test_a_negative_key_is_placed_by_its_64_bit_twos_complement():
    # Python's chunk hashes are signed; the wire carries 64-bit integers.
    key = -3745232253163630700
    assert slot_of(key, 4096) == slot_of(key + (1 << 64), 4096) == mix64(key + (1 << 64)) % 4096


# -- the rule ----------------------------------------------------------------------------------

RING = Ring(["n1", "n2", "n3"])
MEMBERS = ["n1", "n2", "n3"]
PROMPTS = [[11, 12, 13], [21, 22, 23]]  # chunk hashes of two prompts
INSTANCES = ["i-a", "i-b"]


def layout(**chunks) -> dict:
    """A /lookup answer crediting each instance (i_a=2: "i-a" 512 tokens)."""
    return {k.replace("_", "-"): ["LocalCPUBackend", v * CHUNK] for k, v in chunks.items() if v}


def fenced(at: float = 100.0, answers=None, truth=None) -> Availability:
    """A run whose fence at `at` saw both prompts whole for i-a, one chunk of
    the first prompt for i-b, on every node."""
    a = Availability(RING, PROMPTS, INSTANCES, MEMBERS, window=2.0)
    full = [layout(i_a=3, i_b=1), layout(i_a=3)]
    answers = answers or {n: full for n in MEMBERS}
    truth = truth or {"i-a": {11, 12, 13, 21, 22, 23}, "i-b": {11}}
    a.fence(at, answers, truth)
    return a


def other_than(owners: list[str]) -> str:
    return next(n for n in MEMBERS if n not in owners)


def owners_of(key: int) -> list[str]:
    return RING.owners(slot_of(key, RING.slots), MEMBERS)


def test_a_lookup_that_credits_what_the_fence_saw_is_complete():
    a = fenced()
    a.record("n1", 0, 101.0, 101.1, layout(i_a=3, i_b=1))
    a.record("n2", 1, 101.2, 101.3, layout(i_a=3, i_b=2))  # more than required is not judged
    counts, problems = a.judge()
    assert problems == [] and counts["complete"] == 2 and counts["answered"] == 2


def test_a_short_lookup_with_a_reachable_owner_fails_and_names_what_is_missing():
    a = fenced()
    a.record("n1", 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    counts, problems = a.judge(when=lambda t: f"+{t - 100:.3f} s")
    assert counts["incomplete"] == 1 and len(problems) == 1
    p = problems[0]
    assert ("lookup 0 at +1.000 s to n1 (0.100 s), prompt 0: instance i-a credited 256 tokens, "
            "768 required (verified by the fence at +0.000 s)") in p
    owners = ",".join(owners_of(12))
    assert f"missing chunk 1 key 12 slot {slot_of(12, 4096)}, read from owners {owners}" in p


def test_a_short_lookup_is_excused_where_the_node_said_its_prefix_may_be_short():
    a = fenced()
    # i-a stops at chunk 1 (256 tokens); the node said prefixes from 256 on
    # may be short (chunk 1 was read only from uncertain copies).
    a.record("n1", 0, 101.0, 101.1, layout(i_a=1, i_b=1), unsure_from=256)
    counts, problems = a.judge()
    assert problems == [] and counts["excused"] == 1 and counts["unsure"] == 1
    assert "the node said unsure from 256 tokens" in a.excused[0]


def test_a_node_unsure_only_past_where_the_answer_stops_excuses_nothing():
    a = fenced()
    # Unsure from chunk 2 on: the stop at chunk 1 was read from a whole copy.
    a.record("n1", 0, 101.0, 101.1, layout(i_a=1, i_b=1), unsure_from=512)
    counts, problems = a.judge()
    assert counts["incomplete"] == 1 and counts["unsure"] == 0 and len(problems) == 1


def test_the_fence_verifies_the_least_any_node_answered_and_no_more_than_the_workers_hold():
    full = [layout(i_a=3, i_b=1), layout(i_a=3)]
    answers = {"n1": full, "n2": [layout(i_a=2, i_b=1), layout(i_a=3)], "n3": full}
    a = fenced(answers=answers, truth={"i-a": {11, 12, 13, 21, 22}, "i-b": {11}})
    assert a.required(0) == {"i-a": 2, "i-b": 1}
    assert a.required(1) == {"i-a": 2, "i-b": 0}


def test_entries_touched_since_the_fence_are_not_required():
    a = fenced()
    a.touch("i-a", [12])  # evicted, or held by a worker that restarted
    assert a.required(0) == {"i-a": 1, "i-b": 1}
    a.record("n1", 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    assert a.judge()[1] == []
    a.touch("i-b", [11])
    assert a.required(0)["i-b"] == 0
    # A newer fence starts over from what it sees.
    a.fence(200.0, {n: [layout(i_a=3, i_b=1), layout(i_a=3)] for n in MEMBERS},
            {"i-a": {11, 12, 13, 21, 22, 23}, "i-b": {11}})
    assert a.required(0) == {"i-a": 3, "i-b": 1}


@pytest.mark.parametrize("down_for, excused", [((100.5, None), True), ((98.5, 99.5), True),
                                               ((97.0, 98.9), False)])
def test_a_short_lookup_is_excused_only_when_every_owner_was_unreachable_within_the_window(
        down_for, excused):
    a = fenced()
    owners = owners_of(12)
    x = other_than(owners)
    for o in owners:
        a.outage(o, "down", down_for[0])
        if down_for[1] is not None:
            a.outage_over(o, "down", down_for[1])
    a.record(x, 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    counts, problems = a.judge()
    assert (counts["excused"], counts["incomplete"]) == ((1, 0) if excused else (0, 1))
    assert (problems == []) == excused
    if excused:  # the run's log says why
        assert a.excused == [f"lookup 0 at 101.000 to {x} (0.100 s), prompt 0: i-a chunk 1 "
                             f"({owners[0]} down; {owners[1]} down)"]


def test_one_owner_down_excuses_nothing_while_the_other_is_reachable():
    a = fenced()
    owners = owners_of(12)
    a.outage(owners[0], "down", 100.5)
    a.record(other_than(owners), 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    assert a.judge()[0]["incomplete"] == 1


def test_a_cut_node_is_excused_for_slots_owned_across_the_cut_only():
    a = fenced()
    owners = owners_of(12)
    x = other_than(owners)
    for o in owners:
        a.cut(x, o, 100.5)
    a.record(x, 0, 101.0, 101.1, layout(i_a=1, i_b=1))  # x cut from both owners
    a.record(owners[0], 0, 101.2, 101.3, layout(i_a=1, i_b=1))  # an owner answers from its copy
    counts, problems = a.judge()
    assert counts["excused"] == 1 and counts["incomplete"] == 1
    assert f"to {owners[0]}" in problems[0]


def test_a_node_down_within_the_window_reaches_no_other_owner():
    a = fenced()
    owners = owners_of(12)
    x = other_than(owners)
    a.outage(x, "down", 95.0)
    a.outage_over(x, "down", 100.8)  # frozen, thawed 0.2 s before the lookup
    a.record(x, 0, 101.0, 101.001, layout(i_a=1, i_b=1))
    a.record(owners[0], 0, 101.1, 101.2, layout(i_a=1, i_b=1))  # another node: no excuse
    counts, problems = a.judge()
    assert counts["excused"] == 1 and counts["incomplete"] == 1
    assert a.excused[0].endswith(f"({x} itself down; {x} itself down)")
    later = fenced()
    later.outage(x, "down", 95.0)
    later.outage_over(x, "down", 98.0)  # back more than the window before
    later.record(x, 0, 101.0, 101.001, layout(i_a=1, i_b=1))
    assert later.judge()[0]["incomplete"] == 1


def test_a_node_back_from_a_disk_loss_is_unreachable_to_itself_until_it_refilled():
    a = fenced()
    owners = owners_of(12)
    a.outage(owners[0], "empty", 100.5)
    a.outage(owners[1], "down", 100.6)
    a.record(owners[0], 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    assert a.judge()[0]["excused"] == 1


def test_a_double_disk_loss_drops_only_the_slots_both_lost_nodes_owned():
    a = fenced()
    lost = owners_of(12)
    a.disks_lost(lost, 101.0)
    keys = [k for hashes in PROMPTS for k in hashes]
    gone = {k for k in keys if set(owners_of(k)) <= set(lost)}
    assert 12 in gone and gone != set(keys)  # some keys survive on a third node
    assert {k for k in keys if ("i-a", k) in a.touched} == gone
    assert a.required(0)["i-a"] == next(i for i, k in enumerate(PROMPTS[0]) if k in gone)


RING4 = Ring(["n1", "n2", "n3", "n4"])


def joined(views: list[tuple[float, str]], down=(), cut_from=None) -> dict:
    """Counts of one lookup at n2 at 101.0 of key 11 (prompt 0, chunk 0),
    owned by n1, n3 among n1..n3 and by n4, n1 once n4 joins, with n2's
    views of the change to n1..n4 at the given times."""
    a = Availability(RING4, PROMPTS, INSTANCES, MEMBERS, window=2.0)
    a.fence(100.0, {n: [layout(i_a=3), layout(i_a=3)] for n in MEMBERS},
            {"i-a": {11, 12, 13, 21, 22, 23}})
    for at, state in views:
        a.view("n2", at, state, MEMBERS + ["n4"])
    for o in down:
        a.outage(o, "down", 100.5)
    a.record("n2", 0, 101.0, 101.1, layout())
    return a.judge()[0]


def test_a_node_reads_a_slot_from_the_owners_of_its_own_view_of_the_member_set():
    assert RING4.owners(slot_of(11, 4096), MEMBERS) == ["n1", "n3"]
    assert RING4.owners(slot_of(11, 4096), MEMBERS + ["n4"]) == ["n4", "n1"]
    # Before the change reached n2, and while it is joint, the previous owners
    # answer: both down excuses the lookup.
    assert joined([], down=["n1", "n3"])["excused"] == 1
    assert joined([(100.2, "joint")], down=["n1", "n3"])["excused"] == 1
    # Once committed, n4 (reachable) owns the slot: nothing excuses it.
    assert joined([(100.2, "joint"), (100.4, "committed")], down=["n1", "n3"])["incomplete"] == 1
    assert joined([(100.2, "joint"), (100.4, "committed")], down=["n1", "n4"])["excused"] == 1
    # A view held at any moment of the lookup may excuse it.
    assert joined([(100.2, "joint"), (101.05, "committed")], down=["n1", "n3"])["excused"] == 1


def test_a_cut_node_that_no_longer_owns_a_slot_is_excused_for_it():
    a = Availability(RING4, PROMPTS, INSTANCES, MEMBERS, window=2.0)
    a.fence(100.0, {n: [layout(i_a=3), layout(i_a=3)] for n in MEMBERS},
            {"i-a": {11, 12, 13, 21, 22, 23}})
    for other in ("n1", "n2", "n4"):
        a.cut("n3", other, 100.5)
    a.record("n3", 0, 100.6, 100.7, layout())  # n3 owns key 11's slot among n1..n3
    a.view("n3", 101.0, "committed", MEMBERS + ["n4"])
    a.record("n3", 0, 101.2, 101.3, layout())  # and no longer once n4 joined
    counts, problems = a.judge()
    assert counts["incomplete"] == 1 and counts["excused"] == 1
    assert "lookup 0 " in problems[0] and "read from owners n1,n3" in problems[0]


def test_failed_lookups_fail_the_run_beyond_one_in_a_thousand():
    a = fenced()
    for k in range(999):
        a.record("n1", 0, 101.0, 101.1, layout(i_a=3, i_b=1))
    a.record("n2", 0, 102.0, 112.0, None, "TimeoutError: timed out")
    assert a.judge()[1] == []  # 1 of 1000
    a.record("n3", 0, 103.0, 113.0, None, "HTTP 504")
    counts, problems = a.judge()
    assert counts["failed"] == 2 and len(problems) == 2
    assert "to n3 (10.000 s), prompt 0: failed (HTTP 504)" in problems[1]


def test_a_run_judged_again_from_its_json_is_judged_alike():
    a = fenced()
    owners = owners_of(12)
    a.outage(owners[0], "down", 100.5)
    a.cut(other_than(owners), owners[1], 100.6)
    a.view("n1", 100.2, "joint", MEMBERS)
    a.touch("i-b", [11])
    a.record("n1", 0, 101.0, 101.1, layout(i_a=1, i_b=1))
    a.record(other_than(owners), 0, 101.2, 101.3, layout(i_a=1))
    a.record("n2", 1, 101.4, 111.4, None, "TimeoutError")
    again = Availability.loads(a.dumps())
    assert again.judge() == a.judge()
    assert again.judge()[0]["incomplete"] == 1 and again.judge()[0]["excused"] == 1

