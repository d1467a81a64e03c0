// cluster_layout: the files of `lmcc cluster up`'s data dir -- the folders,
// the shared secret and each node's config -- and the file helpers the
// launcher (cluster_command.cpp) shares with it. Failures throw setup_error,
// whose message is shown to the operator as is.
//
//   lay_out(plan, /*rewrite_config=*/false, log);   // before any node starts
//
// Context: the launcher's main thread; not thread-safe.
#pragma once

#include "apps/lmcc/launcher/cluster_command.hpp"

#include <spdlog/logger.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/types.h>

namespace lmcc::apps {

/// Thrown while laying out the data dir; its message is shown as is.
struct setup_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string errno_text(int error);

/// Writes all of `text` to `fd` (`path` names it in the error).
void write_all(int fd, std::string_view text, const std::filesystem::path& path);

std::string read_file(const std::filesystem::path& path);

/// Writes `text` to a fresh temporary beside `path` with `mode`, then moves
/// or links it into place, so a crash never leaves a half-written file that a
/// later run would take as complete. Returns false when `exclusive` and
/// `path` appeared meanwhile (the temporary is dropped then).
bool install_file(const std::filesystem::path& path, std::string_view text, mode_t mode,
                  bool exclusive);

/// Creates the folders, the secret (DIR/cluster.secret, kept when present)
/// and the configs. Everything that can refuse the layout (a kept config of
/// another layout, a missing snapshot) is checked before anything is
/// written, so a refused run changes nothing.
void lay_out(const cluster_plan& plan, bool rewrite_config, spdlog::logger& log);

} // namespace lmcc::apps
