"""lmcc_ingest_idle_priority: ingest's threads under SCHED_IDLE, so request
threads preempt them at once (apps/lmcc/thread_priority.hpp); off by default."""

from pathlib import Path

from conftest import unique, wait_until

SCHED_OTHER, SCHED_IDLE = 0, 5
INGEST = ("lmcc-pull", "lmcc-shard", "lmcc-rows", "ZMQbg/IO/0")
REQUESTS = ("lmcc-reply", "lmcc-heartbeat", "lmcc-http", "ZMQbg/IO/1")


def policies(pid: int) -> dict[str, set[int]]:
    """Thread name -> the scheduling policies of the threads of that name."""
    out: dict[str, set[int]] = {}
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            line = stat.read_text()
        except OSError:  # the thread ended meanwhile
            continue
        name = line[line.index("(") + 1:line.rindex(")")]
        fields = line[line.rindex(")") + 2:].split()  # fields from 3 (state) on
        out.setdefault(name, set()).add(int(fields[41 - 3]))  # 41: policy
    return out


def test_ingest_threads_run_idle_and_request_threads_stay_ordinary(node_factory, make_worker):
    node = node_factory("--ingest-idle-priority", "on")
    seen = policies(node.proc.pid)
    for name in INGEST:
        assert seen.get(name) == {SCHED_IDLE}, (name, seen)
    for name in REQUESTS:
        assert seen.get(name) == {SCHED_OTHER}, (name, seen)
    assert "ingest-priority policy=idle" in node.log_text()
    # Idle, ingest still has the cores to itself: it applies.
    w = make_worker(node, unique("idle-prio"), 0)
    w.register()
    w.admit(range(1000))
    wait_until(lambda: node.key_count(w.instance_id) == 1000, message="1000 keys applied")
    assert w.heartbeat()["type"] == "HeartbeatRetMsg"


def test_every_thread_is_ordinary_by_default(node_factory):
    node = node_factory()
    seen = policies(node.proc.pid)
    assert all(p == {SCHED_OTHER} for p in seen.values()), seen
