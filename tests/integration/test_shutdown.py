"""SIGTERM/SIGINT shut a node down promptly and cleanly (exit 0), also with
workers connected and a control command waiting on a worker that never answers."""

import signal
import threading
import time

from conftest import unique, wait_until
from lmcc_worker import LOCATION, Never


def test_sigterm_with_traffic_in_flight(node_factory, make_worker):
    # A long control timeout, so that the command is surely still waiting.
    node = node_factory("--control-timeout-ms", "60000")
    w = make_worker(node, unique("stop"), 0)
    w.register()
    w.heartbeat()
    w.admit(range(100))
    wait_until(lambda: node.key_count(w.instance_id) == 100, message="100 keys")
    w.control.push(Never())
    result = {}

    def clear():
        try:
            result["response"] = node.post("/clear", {"instance_id": w.instance_id,
                                                      "location": LOCATION})
        except OSError as e:  # the server may close the connection instead of answering
            result["error"] = e

    t = threading.Thread(target=clear)
    t.start()
    wait_until(lambda: w.control.requests("ClearWorkerMsg"), message="the command to reach the worker")

    t0 = time.monotonic()
    assert node.stop() == 0
    assert time.monotonic() - t0 < 5
    t.join(timeout=10)
    assert not t.is_alive(), "the waiting HTTP call must end with the node"
    if "response" in result:
        assert result["response"].status in (500, 503), result["response"]
    log = node.log_text()
    assert "node-signal signal=SIGTERM" in log and "node-stopped" in log


def test_sigint_stops_cleanly(node_factory):
    node = node_factory()
    node.proc.send_signal(signal.SIGINT)
    assert node.proc.wait(timeout=5) == 0
    node.returncode = 0
    assert "node-signal signal=SIGINT" in node.log_text()


def test_sigterm_while_a_backlog_of_batches_and_deregistrations_is_queued(node_factory,
                                                                         make_worker):
    # The stop drains the directory's mailbox; deregistrations still queued there
    # run after the control channel is gone and must find it gone, not freed
    # (a use-after-free crashed the node here once).
    node = node_factory()
    workers = [make_worker(node, unique("stop-backlog"), i) for i in range(4)]
    for w in workers:
        w.register()
    for b in range(60):
        for w in workers:
            base = (w.worker_id + 1) * 10_000_000 + b * 2000
            w.push(w.ops_message([("admit", k) for k in range(base, base + 2000)]))
    for w in workers:
        w.deregister()
    assert node.stop() == 0, node.log_tail()
