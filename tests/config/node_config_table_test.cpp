// node_option_table(): every option's default agrees with its struct
// initializer and its own range, every option is reachable from exactly the
// sources it declares, --help, --dump-config and docs/configuration.md come
// from the table, and the value kinds future options need (lists, records) parse and
// emit.
#include "apps/lmcc/node_config.hpp"
#include "apps/lmcc/node_config_table.hpp"

#include <CLI/CLI.hpp>
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace lmcc::apps::config {
namespace {

using env_map = std::map<std::string, std::string>;

struct parsed_node_cli {
  CLI::App app{"lmcc"};
  node_config_inputs inputs;
  CLI::App* node_cmd = nullptr;

  parsed_node_cli() {
    node_cmd = app.add_subcommand("node");
    add_node_flags(*node_cmd, inputs);
  }

  void parse(std::vector<std::string> args) {
    args.insert(args.begin(), {"lmcc", "node"});
    std::vector<char*> argv;
    for (auto& arg : args)
      argv.push_back(arg.data());
    app.parse(static_cast<int>(argv.size()), argv.data());
    inputs.extra_args = node_cmd->remaining();
  }
};

msg::expected<node_config_result> resolve(std::vector<std::string> args, const env_map& env = {}) {
  parsed_node_cli cli;
  cli.parse(std::move(args));
  return resolve_node_options(cli.inputs, env);
}

bool mentions(const std::vector<std::string>& lines, std::string_view part) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const auto& line) { return line.find(part) != std::string::npos; });
}

/// A file that lives as long as the test.
class temp_file {
public:
  explicit temp_file(const std::string& text) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("lmcc-table-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::ofstream{path_} << text;
  }
  ~temp_file() { std::filesystem::remove(path_); }
  temp_file(const temp_file&) = delete;
  temp_file& operator=(const temp_file&) = delete;
  std::string path() const { return path_.string(); }

private:
  std::filesystem::path path_;
};

/// The default as a user would type it: the plain scalar, or JSON for a mapping.
std::string default_as_text(const option_spec& spec) {
  YAML::Node node = YAML::Load(spec.default_yaml);
  return node.IsScalar() ? node.Scalar() : yaml_to_json(node).dump();
}

// -- defaults --------------------------------------------------------------------------

TEST(NodeOptionTable, EveryDefaultEqualsItsStructInitializerAndIsInItsRange) {
  for (const auto& spec : node_option_table()) {
    ASSERT_TRUE(spec.check_default) << spec.id();
    EXPECT_EQ(spec.check_default(), std::nullopt) << spec.id();
  }
}

TEST(NodeOptionTable, TheDefaultCheckCatchesADefaultThatDisagreesWithTheInitializer) {
  auto port = [](auto& o) -> auto& {
    return o.http.port;
  };
  auto wrong = make_option({.key = "p"}, integer_kind<uint16_t>{.min = 1, .max = 65535},
                           member(port), uint16_t{9001});
  auto why = wrong.check_default();
  ASSERT_TRUE(why.has_value());
  EXPECT_EQ(*why, "the table default is 9001 but the struct initializer is 9000");

  auto custom = custom_option(
      {.key = "p"}, "a port", "9001",
      [](const json& in, resolve_state& s) -> refusal {
        return integer_kind<uint16_t>{.min = 1, .max = 65535}.parse(in, s.options.http.port);
      },
      [](YAML::Emitter& out, const node_options& o) { out << o.http.port; });
  why = custom.check_default();
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("9001"), std::string::npos) << *why;
}

TEST(NodeOptionTable, TheDefaultCheckCatchesADefaultOutsideItsRange) {
  auto threads = [](auto& o) -> auto& {
    return o.http.threads;
  };
  auto row = make_option({.key = "t"}, integer_kind<uint32_t>{.min = 1, .max = 16}, member(threads),
                         uint32_t{32});
  auto why = row.check_default();
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("refused by its own parser: expected an integer in 1..16, got '32'"),
            std::string::npos)
      << *why;
}

TEST(NodeOptionTable, TheDefaultCheckCatchesMirroredMembersThatDisagree) {
  // controller_host keeps one value in two members; so does lmcc_data_dir.
  auto row = make_option({.key = "h"}, text_kind{},
                         members(
                             [](auto& o) -> auto& { return o.http.host; },
                             [](auto& o) -> auto& { return o.zmq.advertise_host; }),
                         std::string("0.0.0.0"));
  EXPECT_EQ(row.check_default(), "the members it sets have different initializers");
}

TEST(NodeOptionTable, AYamlOnlyListOfMapsIsOneRow) {
  // The shape the cluster's member list will take: a row like this, plus a
  // node_options member instead of the test's vector.
  struct peer {
    std::string id;
    uint16_t port = 0;
  };
  std::vector<peer> peers;
  auto row = make_option(
      {.key = "lmcc_peers", .sources = from_yaml, .help = "the other nodes"},
      list_kind<record_kind<peer>>{
          .element = {.fields = {field_of("id", &peer::id, text_kind{.non_empty = true}),
                                 field_of("port", &peer::port,
                                          integer_kind<uint16_t>{.min = 1, .max = 65535})}}},
      into_state([&peers](resolve_state&, std::vector<peer> given) { peers = std::move(given); }),
      std::vector<peer>{});
  EXPECT_EQ(row.check_default(), std::nullopt);
  EXPECT_EQ(row.default_yaml, "[]");
  EXPECT_EQ(row.accepts, "a list of {id: a non-empty string, port: an integer in 1..65535}");
  EXPECT_TRUE(row.takes(from_yaml));
  EXPECT_FALSE(row.takes(from_env) || row.takes(from_flag) || row.takes(from_extra));

  resolve_state s;
  YAML::Node yaml =
      YAML::Load("lmcc_peers:\n  - {id: n2, port: 7001}\n  - id: n3\n    port: 7002\n");
  ASSERT_EQ(row.apply(yaml_to_json(yaml["lmcc_peers"]), s), std::nullopt);
  ASSERT_EQ(peers.size(), 2U);
  EXPECT_EQ(peers[1].id, "n3");
  EXPECT_EQ(peers[1].port, 7002);
  EXPECT_EQ(row.apply(yaml_to_json(YAML::Load("[{id: n2}]")), s), "[0]: \"port\" is missing");
}

// -- names and sources -------------------------------------------------------------------

TEST(NodeOptionTable, KeysFlagsAndEnvironmentNamesAreUnique) {
  std::set<std::string> keys;
  std::set<std::string> flags;
  for (const auto& spec : node_option_table()) {
    EXPECT_FALSE(spec.id().empty());
    EXPECT_FALSE(spec.help.empty()) << spec.id();
    EXPECT_FALSE(spec.accepts.empty()) << spec.id();
    if (!spec.key.empty()) {
      EXPECT_TRUE(keys.insert(std::string(spec.key)).second) << spec.key;
    }
    if (!spec.flag.empty()) {
      EXPECT_TRUE(flags.insert(std::string(spec.flag)).second) << spec.flag;
    }
    if (spec.origin == option_origin::lmcc) {
      EXPECT_TRUE(spec.key.starts_with("lmcc_")) << spec.key;
    }
  }
}

TEST(NodeOptionTable, EveryOptionIsTakenFromTheSourcesItDeclaresAndOnlyThose) {
  const std::string defaults = dump_config(resolve({}).value().options);
  for (const auto& spec : node_option_table()) {
    if (!spec.apply || spec.default_yaml.empty())
      continue;
    SCOPED_TRACE(std::string(spec.id()));
    const std::string text = default_as_text(spec);

    // Each source takes the default itself: no error, no warning, same options.
    auto check_taken = [&](const msg::expected<node_config_result>& r) {
      ASSERT_TRUE(r.has_value()) << r.error().message;
      EXPECT_FALSE(mentions(r->warnings, "unknown")) << r->warnings.front();
      EXPECT_EQ(dump_config(r->options), defaults);
    };
    if (!spec.flag.empty() && spec.takes(from_flag))
      check_taken(resolve({std::string(spec.flag), text}));
    if (spec.key.empty())
      continue;
    temp_file yaml{std::string(spec.key) + ": " + spec.default_yaml + "\n"};
    auto from_yaml_file = resolve({"--config", yaml.path()});
    auto from_environment = resolve({}, {{env_name(spec.key), text}});
    auto from_extra_arg = resolve({"--" + std::string(spec.key) + "=" + text});
    for (auto [source, result] :
         {std::pair{from_yaml, &from_yaml_file}, std::pair{from_env, &from_environment},
          std::pair{from_extra, &from_extra_arg}}) {
      if (spec.takes(source)) {
        check_taken(*result);
      } else {
        EXPECT_TRUE(result->has_value() && mentions((*result)->warnings, "unknown")) << source;
      }
    }
  }
}

TEST(NodeOptionTable, ConfigFileIsOnlyAFlagOrItsVariable) {
  const option_spec* spec = find_option("config_file");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(spec->flag, "--config");
  EXPECT_EQ(env_name(spec->key), "LMCACHE_CONTROLLER_CONFIG_FILE");
  temp_file inner{"controller_port: 9301\n"};
  temp_file outer{"config_file: " + inner.path() + "\n"};
  auto r = resolve({"--config", outer.path()});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->options.http.port, 9000); // not followed
  EXPECT_TRUE(mentions(r->warnings, "unknown key 'config_file'"));
}

// -- what the table generates --------------------------------------------------------------

TEST(NodeOptionTable, HelpListsEveryFlagWithItsDefaultAndKey) {
  parsed_node_cli cli;
  std::string help = cli.node_cmd->help();
  for (const auto& spec : node_option_table()) {
    if (spec.flag.empty())
      continue;
    SCOPED_TRACE(std::string(spec.id()));
    EXPECT_NE(help.find(std::string(spec.flag) + " " + std::string(spec.value_name)),
              std::string::npos);
    if (!spec.default_yaml.empty()) {
      EXPECT_NE(help.find("; default " + spec.default_shown + ")"), std::string::npos);
    }
    if (!spec.key.empty() && spec.takes(from_env)) {
      EXPECT_NE(help.find(env_name(spec.key)), std::string::npos);
    }
  }
  EXPECT_NE(help.find("HTTP worker threads; a control command to a silent worker holds one until "
                      "it times out (an integer in 1..1024; default 32) [lmcc_http_threads, "
                      "LMCACHE_CONTROLLER_LMCC_HTTP_THREADS]"),
            std::string::npos)
      << help;
  EXPECT_NE(help.find("(bytes >= 1; default 8388608 (8 MiB))"), std::string::npos) << help;
}

TEST(NodeOptionTable, DumpConfigHasEveryDumpedOptionInTableOrder) {
  std::string text = dump_config(resolve({}).value().options);
  std::vector<std::string> dumped;
  for (const auto& item : YAML::Load(text))
    dumped.push_back(item.first.Scalar());
  std::vector<std::string> expected;
  for (const auto& spec : node_option_table())
    if (spec.emit)
      expected.emplace_back(spec.key);
  EXPECT_EQ(dumped, expected);
  // Given once, not dumped: the file itself, the legacy port, the seed (its
  // effect is lmcc_none_hash) and LMCache's unused extra_config.
  EXPECT_EQ(expected.size() + 4, node_option_table().size());
}

TEST(NodeOptionTable, TheConfigurationDocOptionsTableIsTheGeneratedOne) {
  std::ifstream in(std::string(LMCC_SOURCE_DIR) + "/docs/configuration.md");
  ASSERT_TRUE(in) << LMCC_SOURCE_DIR "/docs/configuration.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const std::string begin = "<!-- options-table: begin -->\n";
  const std::string end = "<!-- options-table: end -->";
  auto from = doc.find(begin);
  auto to = doc.find(end);
  ASSERT_NE(from, std::string::npos);
  ASSERT_NE(to, std::string::npos);
  from += begin.size();
  EXPECT_EQ(doc.substr(from, to - from), options_markdown())
      << "regenerate it: build/lmcc node --print-options-markdown";
}

TEST(NodeOptionTable, MarkdownHasOneRowPerOption) {
  std::string md = options_markdown();
  EXPECT_EQ(std::count(md.begin(), md.end(), '\n'), 2 + std::ssize(node_option_table()));
  EXPECT_NE(md.find("| `lmcc_http_threads` | `--http-threads` | `32` |"), std::string::npos) << md;
  EXPECT_NE(md.find("| `lmcc_max_frame_bytes` | `--max-frame-bytes` | `8388608 (8 MiB)` |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("Only from the flag or `LMCACHE_CONTROLLER_CONFIG_FILE`."), std::string::npos)
      << md;
}

} // namespace
} // namespace lmcc::apps::config
