// io_lanes: which of libzmq's I/O threads carries which of the node's sockets.
//
// Every TCP byte of a ZMQ context's sockets passes through one of its I/O
// threads. With a single one, a heartbeat or a P2P lookup waits behind the
// ingest bytes that thread is reading and decoding (a worker's multipart is
// tens of KB), and under a flood that thread is always busy. The node's
// context therefore has two: S1 (ingest) on one, the request sockets (S2, S3)
// and the control channel's DEALERs on the other.
//
//   zmq::context_t context{gateway::zmq_io_threads};
//   zmq::socket_t s{context, zmq::socket_type::router};
//   gateway::put_on_lane(context, s, gateway::io_lane::requests); // before bind/connect
//
// Measured with `lmcc-bench flood` on a 2-core VM (medians of three
// alternated runs): P2P p99 11.3 -> 8.2 ms, heartbeat reply p99 11.3 -> 7.8 ms,
// at no cost in CPU per op.
#pragma once

#include <zmq.hpp>

#include <cstdint>

namespace lmcc::gateway {

/// I/O threads of the node's ZMQ context: one per lane.
inline constexpr int zmq_io_threads = 2;

/// A lane is a ZMQ_AFFINITY bit mask naming one I/O thread.
enum class io_lane : uint64_t {
  ingest = 1,   ///< S1, the PULL socket
  requests = 2, ///< S2, S3 and the control channel
};

/// Pins the connections `socket` makes or accepts from now on to `lane`'s I/O
/// thread; libzmq reads ZMQ_AFFINITY at bind and connect, so call it first.
/// A context with fewer I/O threads (a test's) keeps libzmq's own choice:
/// libzmq asserts when an accepted connection's mask names no thread.
inline void put_on_lane(zmq::context_t& context, zmq::socket_t& socket, io_lane lane) {
  if (context.get(zmq::ctxopt::io_threads) >= zmq_io_threads)
    socket.set(zmq::sockopt::affinity, static_cast<uint64_t>(lane));
}

} // namespace lmcc::gateway
