"""A fake LMCache worker that speaks the controller wire protocol (spec 2-4).

It plays every socket a real `LMCacheWorker` opens (spec 2.1):

* W1 PUSH -> the node's PULL: KV batches, full-sync batches/end, deregistration;
* W2 DEALER -> the node's reply ROUTER: register, P2P lookup, full-sync start/status;
* W3 DEALER -> the heartbeat URL handed out in RegisterRetMsg;
* W4 REP bound on the worker's own ip:port, served by a thread with scripted answers.

Messages are plain dicts laid out exactly as msgspec encodes them: the tag pair
{"type": <ClassName>} first, then every field in declaration order. Python's
msgpack packs ints minimally, as msgspec does; use_bin_type=True keeps str as str.

The worker keeps the ground truth the node should converge to: the keys it holds
per location and the next seq_num per location.

    w = FakeWorker(node, "inst-a", 0, ip="127.0.0.5")
    w.register()
    w.admit([1, 2, 3])               # one BatchedKVOperationMsg, seq 0..2
    wait_until(lambda: node.key_count("inst-a") == 3)
    w.close()
"""

from __future__ import annotations

import collections
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

import msgpack
import zmq

LOCATION = "LocalCPUBackend"
CHUNK_SIZE = 256

# The node's default --none-hash is 0 (spec 4.4: controller without vLLM).
NONE_HASH = 0


# -- codec ---------------------------------------------------------------------------


def pack(msg: dict) -> bytes:
    return msgpack.packb(msg, use_bin_type=True)


def unpack(frame: bytes) -> Any:
    # strict_map_key=False: HealthRetMsg.error_codes has int keys.
    return msgpack.unpackb(frame, raw=False, strict_map_key=False)


# -- chunk hashing (spec 4.4) -----------------------------------------------------------


def chunk_hashes(tokens: list[int], none_hash: int = NONE_HASH, chunk_size: int = CHUNK_SIZE) -> list[int]:
    """LMCache's builtin chain: h_i = hash((h_{i-1}, tuple(chunk_i), ())).

    Deterministic without PYTHONHASHSEED: only ints and tuples of ints are hashed.
    """
    out = []
    prefix = none_hash
    for start in range(0, len(tokens), chunk_size):
        prefix = hash((prefix, tuple(tokens[start:start + chunk_size]), ()))
        out.append(prefix)
    return out


# -- message builders (msgspec layout: tag first, fields in declaration order) -----------


def register_msg(instance_id, worker_id, ip, port, peer_init_url=None):
    return {"type": "RegisterMsg", "instance_id": instance_id, "worker_id": worker_id,
            "ip": ip, "port": port, "peer_init_url": peer_init_url}


def heartbeat_msg(instance_id, worker_id, ip, port, peer_init_url=None):
    return {"type": "HeartbeatMsg", "instance_id": instance_id, "worker_id": worker_id,
            "ip": ip, "port": port, "peer_init_url": peer_init_url}


def deregister_msg(instance_id, worker_id, ip, port):
    return {"type": "DeRegisterMsg", "instance_id": instance_id, "worker_id": worker_id,
            "ip": ip, "port": port}


def kv_op(op_type: str, key: int, seq_num: int) -> dict:
    return {"op_type": op_type, "key": key, "seq_num": seq_num}


def batched_kv_msg(instance_id, worker_id, location, operations):
    return {"type": "BatchedKVOperationMsg", "instance_id": instance_id,
            "worker_id": worker_id, "location": location, "operations": operations}


def legacy_kv_msg(kind, instance_id, worker_id, key, location, seq_num=0):
    assert kind in ("KVAdmitMsg", "KVEvictMsg")
    return {"type": kind, "instance_id": instance_id, "worker_id": worker_id, "key": key,
            "location": location, "seq_num": seq_num}



def send_garbage_frames(pull_url: str, seed: int, frames: int) -> None:
    """`frames` frames of 1-299 random bytes (from `seed`) pushed to a node's
    PULL socket at host:port, as a broken or hostile client sends them."""
    gen = random.Random(seed)
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 500)
    push.connect(f"tcp://{pull_url}")
    for _ in range(frames):
        push.send(bytes(gen.randrange(256) for _ in range(gen.randrange(1, 300))))
    push.close()

def p2p_lookup_msg(hashes, instance_id, worker_id):
    return {"type": "BatchedP2PLookupMsg", "hashes": hashes, "instance_id": instance_id,
            "worker_id": worker_id}


def full_sync_start_msg(instance_id, worker_id, location, sync_id, total_keys, batch_count):
    return {"type": "FullSyncStartMsg", "instance_id": instance_id, "worker_id": worker_id,
            "location": location, "sync_id": sync_id, "total_keys": total_keys,
            "batch_count": batch_count}


def full_sync_batch_msg(instance_id, worker_id, location, sync_id, batch_id, keys):
    return {"type": "FullSyncBatchMsg", "instance_id": instance_id, "worker_id": worker_id,
            "location": location, "sync_id": sync_id, "batch_id": batch_id, "keys": keys}


def full_sync_end_msg(instance_id, worker_id, location, sync_id, actual_total_keys):
    return {"type": "FullSyncEndMsg", "instance_id": instance_id, "worker_id": worker_id,
            "location": location, "sync_id": sync_id, "actual_total_keys": actual_total_keys}


def full_sync_status_msg(instance_id, worker_id, sync_id):
    return {"type": "FullSyncStatusMsg", "instance_id": instance_id, "worker_id": worker_id,
            "sync_id": sync_id}


def error_msg(text: str) -> dict:
    return {"type": "ErrorMsg", "error": text}


# -- the worker's REP endpoint (W4) ------------------------------------------------------


@dataclass
class Answer:
    """Reply with `reply` (a dict, or a callable taking the request dict)."""
    reply: Any


@dataclass
class Slow:
    """Sleep `delay` seconds (simulated slowness), then reply."""
    delay: float
    reply: Any


@dataclass
class Error:
    """Reply with ErrorMsg(text), as a real worker does for an unsupported command."""
    text: str


@dataclass
class Never:
    """Never reply. The REP socket is then closed and bound again on the same port
    (a REP that did not reply cannot receive again), so later commands are served."""


@dataclass
class Raw:
    """Reply with these raw bytes (e.g. something undecodable)."""
    payload: bytes


_RET_FOR = {
    "ClearWorkerMsg": "ClearWorkerRetMsg",
    "PinWorkerMsg": "PinWorkerRetMsg",
    "CompressWorkerMsg": "CompressWorkerRetMsg",
    "DecompressWorkerMsg": "DecompressWorkerRetMsg",
    "MoveWorkerMsg": "MoveWorkerRetMsg",
}


class ControlServer:
    """A REP socket on ip:port served by a thread.

    Behaviour per request: the next one-shot action from `script` if any, else the
    default: num_tokens commands answer `num_tokens`, health answers `health_code`,
    check_finish answers CheckFinishWorkerRetMsg(`finish_status`) (a real seed-era
    worker answers ErrorMsg there; tests script that explicitly).
    Every request is recorded in `received` (decoded dicts) in arrival order.
    """

    def __init__(self, ctx: zmq.Context, ip: str, port: Optional[int] = None):
        self.ctx = ctx
        self.ip = ip
        self.num_tokens = 7
        self.health_code = 0
        self.finish_status = "finished"
        self.script: collections.deque = collections.deque()
        self.received: list[dict] = []
        self.rebinds = 0
        self.busy = False  # True while a request is being answered (or ignored)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._sock = self._bind(port)
        self.port = int(self._sock.getsockopt_string(zmq.LAST_ENDPOINT).rsplit(":", 1)[1])
        self._thread = threading.Thread(target=self._run, name=f"fake-rep-{ip}:{self.port}",
                                        daemon=True)
        self._thread.start()

    # -- scripting ---------------------------------------------------------------

    def push(self, *actions) -> None:
        """Queue one-shot actions, used by the next requests in order."""
        with self._lock:
            self.script.extend(actions)

    def requests(self, type_name: Optional[str] = None) -> list[dict]:
        with self._lock:
            return [m for m in self.received if type_name is None or m.get("type") == type_name]

    # -- socket ------------------------------------------------------------------

    def _bind(self, port: Optional[int]) -> zmq.Socket:
        deadline = time.monotonic() + 10.0
        while True:
            sock = self.ctx.socket(zmq.REP)
            sock.setsockopt(zmq.LINGER, 0)
            try:
                if port is None:
                    sock.bind_to_random_port(f"tcp://{self.ip}")
                else:
                    sock.bind(f"tcp://{self.ip}:{port}")
                return sock
            except zmq.ZMQError:
                sock.close(0)
                # The old socket closes asynchronously; its port frees up shortly.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _default_reply(self, req: dict) -> dict:
        t = req.get("type")
        if t in _RET_FOR:
            return {"type": _RET_FOR[t], "num_tokens": self.num_tokens}
        if t == "HealthWorkerMsg":
            return {"type": "HealthWorkerRetMsg", "error_code": self.health_code}
        if t == "CheckFinishWorkerMsg":
            return {"type": "CheckFinishWorkerRetMsg", "status": self.finish_status}
        return error_msg(f"fake worker: unsupported {t}")

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                if not self._sock.poll(50, zmq.POLLIN):
                    continue
                frame = self._sock.recv()
            except zmq.ZMQError:
                if self._stop.is_set():
                    return
                raise
            try:
                req = unpack(frame)
            except Exception:  # noqa: BLE001 - record what arrived, answer an error
                req = {"type": "<undecodable>", "raw": frame}
            with self._lock:
                self.busy = True
                self.received.append(req)
                action = self.script.popleft() if self.script else None
            try:
                self._serve(req, action)
            finally:
                self.busy = False

    def _serve(self, req: dict, action) -> None:
        if action is None:
            action = Answer(self._default_reply)
        if isinstance(action, Never):
            self._sock.close(0)
            self._sock = self._bind(self.port)
            self.rebinds += 1
            return
        if isinstance(action, Raw):
            self._sock.send(action.payload)
            return
        if isinstance(action, Slow):
            time.sleep(action.delay)  # simulated slowness, not synchronisation
            reply = action.reply
        elif isinstance(action, Error):
            reply = error_msg(action.text)
        else:
            reply = action.reply
        if callable(reply):
            reply = reply(req)
        self._sock.send(pack(reply))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close(0)


# -- the worker -------------------------------------------------------------------------


class FakeWorker:
    """One (instance_id, worker_id) with its W1-W4 sockets and its ground truth."""

    def __init__(self, node, instance_id: str, worker_id: int = 0, ip: str = "127.0.0.1",
                 peer_init_url: Optional[str] = None, control: bool = True,
                 port: Optional[int] = None, recv_timeout_ms: int = 10_000):
        self.node = node
        self.instance_id = instance_id
        self.worker_id = worker_id
        self.ip = ip
        self.peer_init_url = peer_init_url
        self.recv_timeout_ms = recv_timeout_ms
        self.ctx = zmq.Context.instance()
        self.control: Optional[ControlServer] = ControlServer(self.ctx, ip) if control else None
        if self.control is not None:
            self.port = self.control.port
        else:
            # No REP endpoint: an address nothing listens on (commands would time out).
            self.port = port if port is not None else 1
        self.push_sock = self.ctx.socket(zmq.PUSH)
        self.push_sock.setsockopt(zmq.LINGER, 2000)
        self.push_sock.connect(f"tcp://{node.pull_url}")
        self.req_sock = self._dealer(node.reply_url)
        self.hb_sock: Optional[zmq.Socket] = None
        self.heartbeat_url: Optional[str] = None
        self.next_seq: dict[str, int] = collections.defaultdict(int)
        self.keys: dict[str, set[int]] = collections.defaultdict(set)

    # -- sockets -----------------------------------------------------------------

    def _dealer(self, url: str) -> zmq.Socket:
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.setsockopt(zmq.RCVTIMEO, self.recv_timeout_ms)
        s.setsockopt(zmq.SNDTIMEO, 10_000)
        s.connect(f"tcp://{url}")
        return s

    def request(self, msg: dict, sock: Optional[zmq.Socket] = None) -> dict:
        """One W2 request: send [b"", payload], the reply is the last frame."""
        sock = sock or self.req_sock
        sock.send_multipart([b"", pack(msg)])
        return self.recv_reply(sock)

    def recv_reply(self, sock: Optional[zmq.Socket] = None) -> dict:
        frames = (sock or self.req_sock).recv_multipart()
        assert frames[0] == b"", f"reply should be [b'', payload], got {frames!r}"
        return unpack(frames[-1])

    def push(self, *msgs: dict) -> None:
        """One PUSH multipart, one message per frame (the worker's batched push)."""
        self.push_sock.send_multipart([pack(m) for m in msgs])

    def push_frames(self, frames: list[bytes]) -> None:
        self.push_sock.send_multipart(frames)

    # -- registration and heartbeats ------------------------------------------------

    def register_message(self) -> dict:
        return register_msg(self.instance_id, self.worker_id, self.ip, self.port, self.peer_init_url)

    def register(self) -> dict:
        reply = self.request(self.register_message())
        assert reply.get("type") == "RegisterRetMsg", reply
        url = reply["extra_config"].get("heartbeat_url")
        if url:
            self.heartbeat_url = url
            if self.hb_sock is None:
                self.hb_sock = self._dealer(url)
        return reply

    def heartbeat_message(self) -> dict:
        return heartbeat_msg(self.instance_id, self.worker_id, self.ip, self.port, self.peer_init_url)

    def heartbeat(self) -> dict:
        """A heartbeat on W3 (the URL from registration, else the node's heartbeat port)."""
        if self.hb_sock is None:
            self.hb_sock = self._dealer(self.heartbeat_url or self.node.heartbeat_url)
        reply = self.request(self.heartbeat_message(), self.hb_sock)
        assert reply.get("type") == "HeartbeatRetMsg", reply
        return reply

    def deregister(self) -> None:
        self.push(deregister_msg(self.instance_id, self.worker_id, self.ip, self.port))
        self.keys.clear()
        self.next_seq.clear()

    # -- KV events ---------------------------------------------------------------

    def ops_message(self, ops: list[tuple[str, int]], location: str = LOCATION,
                    seqs: Optional[list[int]] = None) -> dict:
        """A BatchedKVOperationMsg; updates the ground truth and seq counter.

        seqs: explicit seq numbers (to make gaps); else the next ones in order.
        """
        events = []
        for i, (op, key) in enumerate(ops):
            if seqs is None:
                seq = self.next_seq[location]
            else:
                seq = seqs[i]
            self.next_seq[location] = seq + 1
            events.append(kv_op(op, key, seq))
            if op == "admit":
                self.keys[location].add(key)
            else:
                self.keys[location].discard(key)
        return batched_kv_msg(self.instance_id, self.worker_id, location, events)

    def admit(self, keys, location: str = LOCATION) -> None:
        self.push(self.ops_message([("admit", k) for k in keys], location))

    def evict(self, keys, location: str = LOCATION) -> None:
        self.push(self.ops_message([("evict", k) for k in keys], location))

    def admit_tokens(self, tokens: list[int], chunks: Optional[int] = None,
                     location: str = LOCATION) -> list[int]:
        """Admits the chain hashes of `tokens` (the first `chunks` of them)."""
        hashes = chunk_hashes(tokens)[:chunks]
        self.admit(hashes, location)
        return hashes

    def key_count(self) -> int:
        return sum(len(s) for s in self.keys.values())

    # -- P2P -----------------------------------------------------------------------

    def p2p_lookup(self, hashes: list[int]) -> list:
        reply = self.request(p2p_lookup_msg(hashes, self.instance_id, self.worker_id))
        assert reply.get("type") == "BatchedP2PLookupRetMsg", reply
        return reply["layout_info"]

    # -- full sync (spec 4.9, the sender side) --------------------------------------------

    def full_sync_start(self, sync_id: str, keys: list[int], batch_size: int,
                        location: str = LOCATION) -> dict:
        batches = max(1, -(-len(keys) // batch_size))
        reply = self.request(full_sync_start_msg(self.instance_id, self.worker_id, location,
                                                 sync_id, len(keys), batches))
        assert reply.get("type") == "FullSyncStartRetMsg", reply
        return reply

    def full_sync_batches(self, sync_id: str, keys: list[int], batch_size: int,
                          only: Optional[list[int]] = None, location: str = LOCATION) -> None:
        """FullSyncBatchMsg for each batch id (or only those in `only`), one multipart."""
        batches = max(1, -(-len(keys) // batch_size))
        msgs = []
        for b in range(batches):
            if only is not None and b not in only:
                continue
            msgs.append(full_sync_batch_msg(self.instance_id, self.worker_id, location, sync_id,
                                            b, keys[b * batch_size:(b + 1) * batch_size]))
        if msgs:
            self.push(*msgs)

    def full_sync_end(self, sync_id: str, total: int, location: str = LOCATION) -> None:
        self.push(full_sync_end_msg(self.instance_id, self.worker_id, location, sync_id, total))

    def full_sync_status(self, sync_id: str) -> dict:
        reply = self.request(full_sync_status_msg(self.instance_id, self.worker_id, sync_id))
        assert reply.get("type") == "FullSyncStatusRetMsg", reply
        return reply

    # -- teardown --------------------------------------------------------------------

    def close(self) -> None:
        for s in (self.push_sock, self.req_sock, self.hb_sock):
            if s is not None:
                s.close(0 if s is not self.push_sock else 2000)
        if self.control is not None:
            self.control.close()
