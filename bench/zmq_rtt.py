#!/usr/bin/env python3
"""The ZMQ round-trip floor of this machine: a ROUTER echo and a DEALER client in
one process over loopback TCP, 3000 round trips of 100 bytes (bench/RESULTS.md
compares lmcc's P2P latency with it). Usage: /usr/bin/python3 bench/zmq_rtt.py"""
import threading
import time

import zmq

ctx = zmq.Context()
server = ctx.socket(zmq.ROUTER)
port = server.bind_to_random_port("tcp://127.0.0.1")


def echo() -> None:
    while True:
        frames = server.recv_multipart()
        if frames[-1] == b"stop":
            return
        server.send_multipart(frames)


thread = threading.Thread(target=echo)
thread.start()
client = ctx.socket(zmq.DEALER)
client.connect(f"tcp://127.0.0.1:{port}")
times = []
for _ in range(3000):
    t0 = time.perf_counter()
    client.send_multipart([b"", b"x" * 100])
    client.recv_multipart()
    times.append(time.perf_counter() - t0)
client.send_multipart([b"", b"stop"])
thread.join()
times.sort()
print(f"zmq round trip: p50 {times[len(times) // 2] * 1e6:.0f} us, "
      f"p99 {times[int(len(times) * 0.99)] * 1e6:.0f} us")
