// gateway_options: the sockets and limits of one node's front ends.
//
// Field names follow LMCache's controller config where one exists
// (controller_host, controller_port, controller_monitor_ports, ...).
//
// Context: a plain options struct, filled by apps/lmcc/node_config and read by
// zmq_frontend, control_channel and http_api at start-up.
#pragma once

#include "messages/limits.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace lmcc::gateway {

struct zmq_options {
  /// Host part of every ZMQ bind URL (LMCache `controller_host`).
  /// Default: "0.0.0.0"
  std::string host = "0.0.0.0";

  /// S1 PULL port (`controller_monitor_ports.pull`). Default: 8300
  uint16_t pull_port = 8300;

  /// S2 ROUTER port (`controller_monitor_ports.reply`); nullopt = no S2.
  /// Default: 8400
  std::optional<uint16_t> reply_port = 8400;

  /// S3 ROUTER heartbeat port (`controller_monitor_ports.heartbeat`); nullopt =
  /// no S3. lmcc turns it on by default (LMCache does not), because without it
  /// a restarted controller can never ask workers to resync.
  /// Default: 8082
  std::optional<uint16_t> heartbeat_port = 8082;

  /// Host put into the heartbeat URL handed to workers (`controller_advertise_host`).
  /// Empty: this host's outbound IP, or 127.0.0.1 for workers on this host.
  /// Default: ""
  std::string advertise_host;

  /// Limits applied to every decoded frame.
  msg::decode_limits limits;

  /// Most frames accepted in one PULL multipart; the rest are counted and dropped.
  /// LMCache workers send at most 50. Default: 1024
  uint32_t max_frames_per_multipart = 1024;

  /// Requests from one ROUTER peer that may wait for replies at once; further
  /// requests are answered at once with an ErrorMsg ("too many pending requests").
  /// Default: 1024
  uint32_t max_pending_per_peer = 1024;

  /// How long the PULL thread waits for more frames before it hands a small
  /// round to the actors (0: never waits). Each round costs thread wake-ups, so
  /// at moderate rates waiting cuts the CPU per op; it adds at most this much
  /// to when an op is applied. 10 ms is LMCache's own worker-side batching
  /// window; at a steady 100 k ops/s it took the node's CPU per op from
  /// 2.18 (2 ms) to 1.45 us. Busy connections are held in the kernel instead
  /// (pull_hold_bytes) and released once per this period; 0 also turns holding
  /// off. Default: 10 ms
  std::chrono::milliseconds pull_coalesce{10};

  /// A round this large (in ops) is handed over at once. Default: 4096
  uint64_t pull_coalesce_ops = 4096;

  /// Messages libzmq queues per worker connection on S1 (ZMQ_RCVHWM) before it
  /// stops reading that connection, so that TCP pushes back on the worker.
  /// lmcc's credits (max_inflight_ops) bound the work past the PULL thread;
  /// this bounds what waits before it. libzmq counts a multipart as one
  /// message, and a worker sends up to 50 frames per multipart: at libzmq's
  /// default of 1000 one connection could queue 50 000 frames, and a flood from
  /// four workers held ~500 MiB there; 8, 16 and 32 all took that to ~0.2 GiB
  /// beyond the index and cut the CPU per op. Default: 16
  uint32_t pull_queue_messages = 16;

  /// Kernel-side coalescing of busy S1 connections (pull_loop.hpp): bytes a
  /// held connection gathers in the kernel (SO_RCVLOWAT) before libzmq reads
  /// it ahead of the next release, which comes every pull_coalesce. Holding
  /// spares libzmq's I/O thread a wake-up per multipart. 0: never hold.
  /// Default: 64 KiB
  uint32_t pull_hold_bytes = 64 * 1024;

  /// On a clean stop, how long the PULL thread reads on after half-closing
  /// the workers' connections, waiting for each worker to close its side
  /// (what a worker wrote before that is read, not lost as a seq gap). A
  /// worker's libzmq closes within a round trip; this bounds a peer that does
  /// not. Default: 1 s
  std::chrono::milliseconds pull_stop_drain{1000};
};

struct control_options {
  /// How long the controller waits for a worker to answer one command on its
  /// REP socket before failing that command with an ErrorMsg and resetting the
  /// socket. Default: 30 s
  std::chrono::milliseconds request_timeout{30'000};

  /// Commands queued per worker behind the one in flight; more are refused.
  /// Default: 256
  uint32_t max_queued_per_worker = 256;
};

/// Who may call the HTTP API, and over what (http_access.hpp).
struct http_security {
  /// File holding the API token (lmcc_api_token_file). Empty: the variable
  /// named by token_env. Default: ""
  std::string token_file;

  /// Environment variable holding the API token when no file is given
  /// (lmcc_api_token_env). Unset or empty too: no token, the API is open as
  /// LMCache's is. Default: "LMCC_API_TOKEN"
  std::string token_env = "LMCC_API_TOKEN";

  /// Require the token for LMCache's read endpoints, the metrics and the
  /// cluster's status too (lmcc_api_token_for_reads); probes stay open.
  /// Default: false
  bool token_for_reads = false;

  /// PEM certificate (chain) and private key: the API serves HTTPS only
  /// (lmcc_http_tls_cert_file, lmcc_http_tls_key_file; both or neither).
  /// Default: "" (plain HTTP)
  std::string tls_cert_file;
  std::string tls_key_file;

  /// The token itself, resolved at start from token_file or token_env (never
  /// a config key, never printed). Empty: none.
  std::string token;

  bool tls() const noexcept { return !tls_cert_file.empty(); }
};

struct http_options {
  /// HTTP bind host (LMCache `controller_host`). Default: "0.0.0.0"
  std::string host = "0.0.0.0";

  /// HTTP port (LMCache `controller_port`). Default: 9000
  uint16_t port = 9000;

  /// Largest request body accepted; larger bodies get 413.
  /// Default: 64 MiB
  size_t max_body_bytes = size_t{64} << 20;

  /// Most token ids accepted in one /lookup or /pin body; more get 413.
  /// Default: 1,048,576
  size_t max_tokens = size_t{1} << 20;

  /// How long an HTTP handler waits for the controller before answering 504.
  /// Default: 60 s (longer than control_options::request_timeout)
  std::chrono::milliseconds handler_timeout{60'000};

  /// Worker threads of the HTTP server. A handler holds its thread while it
  /// waits for the controller, so a control command to a silent worker holds
  /// one for up to control_options::request_timeout; more threads keep /lookup
  /// answering meanwhile. Idle threads cost little. Default: 32
  uint32_t threads = 32;

  http_security security;
};

} // namespace lmcc::gateway
