"""A TCP proxy a test controls, to cut the links between cluster nodes.

    proxy = TcpProxy(upstream_port)     # listens on proxy.port (127.0.0.1)
    proxy.pause()                       # a partition: no byte moves either way
    proxy.resume()                      # healed: the held bytes flow again
    proxy.delay = 0.2                   # every chunk waits 200 ms (in order)
    proxy.close()

pause() models a network that drops every packet: nothing is read from either
side, so TCP holds what the endpoints sent (as it would retransmit it) and the
endpoints' own timeouts decide what happens to the connection. A connect
during the pause succeeds at the kernel (the listen backlog) but nothing
crosses, as a connect whose handshake then hangs. When an endpoint gives up
and closes its socket, the proxy sees that only after the heal and closes the
other side: no byte is invented or reordered.
"""

from __future__ import annotations

import select
import socket
import threading
import time


class TcpProxy:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1"):
        self.upstream = (host, upstream_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((host, 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        # Seconds each chunk read waits before it is passed on (a slow link;
        # order is kept, since one thread pumps each direction).
        self.delay = 0.0
        self._flowing = threading.Event()
        self._flowing.set()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        threading.Thread(target=self._accept_loop, daemon=True,
                         name=f"proxy-{self.port}").start()

    def pause(self) -> None:
        self._flowing.clear()

    def resume(self) -> None:
        self._flowing.set()

    @property
    def paused(self) -> bool:
        return not self._flowing.is_set()

    def close(self) -> None:
        self._closed.set()
        self._flowing.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                s.close()
            self._sockets.clear()

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                r, _, _ = select.select([self._listener], [], [], 0.2)
                if not r:
                    continue
                client, _ = self._listener.accept()
            except (OSError, ValueError):
                return  # closed
            self._flowing.wait()  # a partition: the connection stays in limbo
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()  # the node is down: as a refused connect
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    upstream.close()
                    return
                self._sockets.update((client, upstream))
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._closed.is_set():
                self._flowing.wait()
                r, _, _ = select.select([src], [], [], 0.2)
                if not r or not self._flowing.is_set():
                    continue
                data = src.recv(1 << 16)
                if not data:
                    break
                if self.delay:
                    time.sleep(self.delay)
                dst.sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass
            with self._lock:
                self._sockets.discard(src)
                self._sockets.discard(dst)
