"""The chaos checker's invariant 4 (full syncs follow proofs, and only proofs),
fed node log lines in the nodes' own formats: it must hold for a proof that was
answered, and catch an ask without a proof and a proof never answered."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit import full_sync_audit, log_events  # noqa: E402

PROOF = ("[2026-12-02 08:05:58.646] [warning] seq-gap-proven instance=i-1 worker=0 "
         "location=LocalCPUBackend expected=64 got=41 reason=frames_lost_with_node "
         "action=full-sync-requested")
ASK = ("[2026-12-02 08:06:01.100] [info] full-sync-requested instance=i-1 worker=0 "
       "reason=frames_lost_with_node")
REREGISTERED = ("[2026-12-02 08:06:00.500] [info] worker-reregistered instance=i-1 worker=0 "
                "ip=127.0.10.16 port=40239 kv=cleared incarnation=117715682074820608")
REGISTERED = ("[2026-12-02 08:05:47.138] [info] worker-registered instance=i-2 worker=1 "
              "ip=127.0.10.14 port=39105 peer_init_url=None uid=17964108840047500700")
SPLIT = ("[2026-12-02 08:05:59.000] [warning] worker-entity-split uid=17964108840047500700 "
         "home=n2 action=full-sync-requested")
ASK_OTHER = ("[2026-12-02 08:06:02.000] [info] full-sync-requested instance=i-2 worker=1 "
             "reason=entity_split")
SINCE = 0.0


def audit(tmp_path, *lines, since=SINCE):
    log = tmp_path / "node-1-1.log"
    log.write_text("\n".join(lines) + "\n")
    return full_sync_audit(log_events([log]), since)


def test_a_proof_answered_by_an_ask_holds(tmp_path):
    assert audit(tmp_path, PROOF, ASK) == []
    assert audit(tmp_path, REGISTERED, SPLIT, ASK_OTHER) == []  # the uid names the worker


NOT_FORWARDED = ("[2026-12-02 08:05:59.500] [warning] worker-frames-not-forwarded instance=i-1 "
                 "worker=0 uid=5 action=full-sync-owed")
ASK_NOT_FORWARDED = ("[2026-12-02 08:06:01.200] [info] full-sync-requested instance=i-1 worker=0 "
                     "reason=frames_not_forwarded")


def test_frames_a_forwarder_gave_up_are_a_proof(tmp_path):
    # A worker quiet after a dropped forward shows no gap: the drop itself,
    # logged by the node that gave the frames up, justifies the ask (chaos
    # seed 1971), and must be answered by one (seed 1937 lost the frames).
    assert audit(tmp_path, NOT_FORWARDED, ASK_NOT_FORWARDED) == []
    problems = audit(tmp_path, NOT_FORWARDED)
    assert len(problems) == 1 and "never asked" in problems[0], problems


def test_an_ask_without_a_proof_is_caught(tmp_path):
    problems = audit(tmp_path, ASK)
    assert len(problems) == 1 and "no proof" in problems[0], problems
    assert len(audit(tmp_path, REGISTERED, ASK_OTHER)) == 1


def test_a_proof_never_answered_is_caught_unless_the_worker_registered_again(tmp_path):
    problems = audit(tmp_path, PROOF)
    assert len(problems) == 1 and "never asked" in problems[0], problems
    assert audit(tmp_path, PROOF, REREGISTERED) == []


SYNC_STARTED = ("[2026-12-02 08:05:58.700] [info] full-sync-start instance=i-1 worker=0 "
                "location=LocalCPUBackend sync_id=i-1_0_x_LocalCPUBackend total_keys=60 batches=1")
ASK_EARLY = ("[2026-12-02 08:05:58.600] [info] full-sync-requested instance=i-1 worker=0 "
             "reason=frames_lost_with_node")


def test_a_proof_answered_by_a_full_sync_that_starts_after_it_holds(tmp_path):
    # Asked 46 ms before the proof (another proof), started 54 ms after it.
    assert audit(tmp_path, PROOF.replace("08:05:58.646", "08:05:58.500"), ASK_EARLY, PROOF,
                 SYNC_STARTED) == []
    # A sync that started before the proof does not answer it.
    early_start = SYNC_STARTED.replace("08:05:58.700", "08:05:58.610")
    problems = audit(tmp_path, PROOF.replace("08:05:58.646", "08:05:58.500"), ASK_EARLY,
                     early_start, PROOF)
    assert len(problems) == 1 and "never asked" in problems[0], problems


def test_what_happened_before_the_schedule_is_not_judged(tmp_path):
    late = log_events([_write(tmp_path, ASK)])[0][0] + 1
    assert audit(tmp_path, ASK, since=late) == []


def _write(tmp_path, line):
    path = tmp_path / "one.log"
    path.write_text(line + "\n")
    return path


def test_a_request_the_cluster_answers_with_an_error_is_retried_and_nothing_else():
    from chaos import answered

    replies = [{"type": "ErrorMsg", "error": "request expired"}, {"type": "RegisterRetMsg"}]

    def register():
        reply = replies.pop(0)
        assert reply["type"] == "RegisterRetMsg", reply
        return reply

    assert answered(register, "test")["type"] == "RegisterRetMsg"
    assert replies == []

    def broken():
        assert False, {"type": "HeartbeatRetMsg", "commands": "garbled"}

    try:
        answered(broken, "test")
    except AssertionError:
        pass
    else:
        raise AssertionError("a failure that is not an ErrorMsg must not be retried")


INDEX_LOST = ("[2026-12-06 00:13:36.431] [warning] index-lost slots=1355 workers=6 from=refill "
              "action=full-sync-all")
ASK_LOST = ("[2026-12-06 00:13:37.000] [info] full-sync-requested instance=i-1 worker=0 "
            "reason=slot_copies_lost")
ASK_LOST_OTHER = ("[2026-12-06 00:13:37.100] [info] full-sync-requested instance=i-2 worker=1 "
                  "reason=slot_copies_lost")
ASK_LOST_EARLY = ("[2026-12-06 00:13:35.000] [info] full-sync-requested instance=i-1 worker=0 "
                  "reason=slot_copies_lost")


def test_slots_lost_on_every_owner_prove_an_ask_of_every_worker(tmp_path):
    # Two disks lost: no copy of some slots is left, and every worker is asked
    # (cluster/refill_leftovers.hpp); one line proves them all, but only later asks.
    assert audit(tmp_path, INDEX_LOST, ASK_LOST, ASK_LOST_OTHER) == []
    problems = audit(tmp_path, ASK_LOST_EARLY, INDEX_LOST)
    assert len(problems) == 1 and "no proof" in problems[0], problems


CONFLICT = ("[2026-12-02 08:06:00.000] [warning] slot-copies-conflict "
            "worker_uid=17964108840047500700 holder=4903169205998116202 slot=3998 from=n3 "
            "action=full-sync-requested")
ASK_CONFLICT = ("[2026-12-02 08:06:07.000] [info] full-sync-requested instance=i-2 worker=1 "
                "reason=slot_copies_conflict")


def test_a_finding_that_names_its_worker_and_asks_for_a_full_sync_is_a_proof(tmp_path):
    assert audit(tmp_path, REGISTERED, CONFLICT, ASK_CONFLICT) == []
    problems = audit(tmp_path, REGISTERED, CONFLICT)  # and must be answered
    assert len(problems) == 1 and "never asked" in problems[0], problems
    assert len(audit(tmp_path, REGISTERED, ASK_CONFLICT)) == 1  # no finding, no proof

