// node_options: everything `lmcc node` is configured with, gathered from
// LMCache's controller flags, YAML and LMCACHE_CONTROLLER_* environment
// variables plus lmcc's own options (see node_config.hpp for the sources and
// their precedence).
//
// Context: a plain options struct, built once in main().
#pragma once

#include "actors/controller_options.hpp"
#include "gateway/gateway_options.hpp"

#include <string>

namespace lmcc::apps {

struct node_options {
  gateway::zmq_options zmq;
  gateway::control_options control;
  gateway::http_options http;
  actors::controller_options controller;

  /// spdlog level: trace, debug, info, warn, error, critical, off. Default: "info"
  std::string log_level = "info";

  /// Where the node keeps its RocksDB (persistence issue). Default: "./lmcc-data"
  std::string data_dir = "./lmcc-data";

  /// CAF scheduler threads; 0 = the machine's core count. Default: 0
  uint32_t scheduler_threads = 0;
};

} // namespace lmcc::apps
