// node_config_table: the one table of `lmcc node`'s options.
//
// Each row declares one option once: its YAML key (which also names its
// LMCACHE_CONTROLLER_<KEY> environment variable and its extra --key=value
// argument), its command-line flag, the kind of value it takes, the member of
// node_options it sets, its default and its help. The command line
// (add_node_flags), the layering of YAML, environment, flags and extra
// arguments (resolve_node_options), --dump-config, --help and docs/configuration.md's
// options table (options_markdown) are all generated from node_option_table(),
// which lives in node_config_table.cpp.
//
// Defaults are written twice on purpose, as in RocksDB's options structs: as
// the struct member's initializer (what every user of the struct gets, and
// what the node starts from) and in the row (what --help, docs/configuration.md and
// --dump-config's docs say). tests/config/node_config_table_test.cpp checks
// for every row that the two agree and that the option's own parser accepts
// its default (its range contains it), so neither can drift.
//
// How to add an option, e.g. lmcc_max_inflight_ops for flow control:
//   1. Add the field to its options struct with a doc comment, a `Default: X`
//      line and the initializer X (gateway/gateway_options.hpp, say).
//   2. Add one row to make_table() in node_config_table.cpp, where --help and
//      --dump-config should list it:
//        make_option({.key = "lmcc_max_inflight_ops", .flag = "--max-inflight-ops",
//                     .value_name = "N",
//                     .help = "operations in flight per worker before it is throttled"},
//                    integer_kind<uint32_t>{.min = 1, .max = 1 << 20},
//                    member([](auto& o) -> auto& { return o.zmq.max_inflight_ops; }),
//                    uint32_t{256}),
//      That is all the flag, the YAML key, LMCACHE_CONTROLLER_LMCC_MAX_INFLIGHT_OPS,
//      --lmcc_max_inflight_ops=N and the dump need.
//   3. Paste `build/lmcc node --print-options-markdown` over docs/configuration.md's
//      options table (the test fails until you do).
//
// The parts of a row:
//   * names (option_names): key, flag (optional), value_name, origin, sources
//     (default: everywhere; e.g. `.sources = from_yaml` for a file-only
//     option), excludes, help.
//   * a kind (node_config_values.hpp): integer_kind<T>{min, max,
//     power_of_two}, byte_size_kind, mebibytes_kind, seconds_kind,
//     milliseconds_kind, seconds_or_off_kind, number_kind, switch_kind,
//     text_kind, choice_kind, list_kind<Element>, record_kind<T>. A cluster
//     member list given in YAML as a list of {id, host, port} maps is
//       list_kind<record_kind<member>>{.element = {.fields = {
//           field_of("id", &member::id, text_kind{.non_empty = true}),
//           field_of("host", &member::host, text_kind{.non_empty = true}),
//           field_of("port", &member::port, integer_kind<uint16_t>{.min = 1, .max = 65535})}}}
//     (the environment and flags would give it as JSON text).
//   * where the value goes: member(access) for one member, members(a, b) for
//     one value kept in two members, into_state(write) for a value that only
//     feeds a cross-option rule, read_then_write(access, write) for a value
//     dumped from a member but decided by a rule.
//   * the default, of the kind's value_type; std::nullopt for "unset".
// A value no kind fits (several members, warnings, LMCache's quirks) takes
// custom_option() with its own apply and emit, as controller_monitor_ports
// does. Rules between options (two keys for one setting, a legacy fallback,
// replicas <= members) go into apply_cross_option_rules() (node_config_rules.cpp).
//
// Context: the table is built once, on first use, and is immutable after
// that; it is safe to read from any thread.
#pragma once

#include "apps/lmcc/node_config_values.hpp"
#include "apps/lmcc/node_options.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lmcc::apps::config {

/// Prefix of the environment variables: LMCACHE_CONTROLLER_<KEY UPPERCASE>.
inline constexpr std::string_view env_prefix = "LMCACHE_CONTROLLER_";

/// LMCache's pull port for --monitor-port, used only when
/// controller_monitor_ports is null (legacy mode).
inline constexpr uint16_t legacy_default_monitor_port = 9001;

/// The sources of a value, lowest precedence first.
enum class layer { yaml = 1, env = 2, cli = 3, extra = 4 };

/// What the layers build up. `options` starts at node_options' initializers.
struct resolve_state {
  node_options options;

  /// controller_monitor_ports resolved to null: LMCache's legacy mode.
  bool monitor_ports_null = false;

  /// --monitor-port as given; legacy_default_monitor_port when not.
  std::optional<uint16_t> legacy_monitor_port;

  /// lmcc_none_hash and lmcc_python_hash_seed both set the initial chunk
  /// hash; the higher layer wins and one layer with both is an error.
  struct hash_setting {
    int64_t none_hash = 0;
    layer from = layer::yaml;
    std::string label;
  };
  std::optional<hash_setting> none_hash;
  std::optional<hash_setting> python_hash_seed;

  /// Where the value being applied comes from.
  layer current = layer::yaml;
  std::string current_label;

  std::vector<std::string> warnings;
  std::vector<std::string> errors;
};

/// Where an option's value may come from.
enum option_sources : unsigned {
  from_yaml = 1U << 0,  ///< a key of the --config file
  from_env = 1U << 1,   ///< LMCACHE_CONTROLLER_<KEY>
  from_flag = 1U << 2,  ///< the row's command-line flag
  from_extra = 1U << 3, ///< an extra --key=value argument
  from_anywhere = from_yaml | from_env | from_flag | from_extra,
};

/// Whose option it is: LMCache's controller's (same name and meaning) or lmcc's.
enum class option_origin { lmcache, lmcc };

/// The declared part of a row; written with designated initializers.
struct option_names {
  /// YAML key; the environment variable and the extra argument are derived
  /// from it. Empty: a flag-only option.
  std::string_view key;
  /// Command-line flag; empty: none.
  std::string_view flag;
  /// Placeholder in --help and the docs (PORT, SECONDS, ...).
  std::string_view value_name = "VALUE";
  option_origin origin = option_origin::lmcc;
  /// A bitwise or of option_sources.
  unsigned sources = from_anywhere;
  /// Another row's flag that may not be given together with this one.
  std::string_view excludes;
  /// One line on what the option does, for --help and the docs.
  std::string_view help;
};

/// One row of the table; build rows with make_option or custom_option.
struct option_spec : option_names {
  /// The default as YAML text (as --dump-config prints it); empty: the
  /// option has no value unless given.
  std::string default_yaml;
  /// The default as the docs show it (8388608 (8 MiB)); "unset" when none.
  std::string default_shown;
  /// What values are accepted, for the docs and --help.
  std::string accepts;

  /// Parses `value` and stores it in the state; empty for options the
  /// resolver itself consumes (--config).
  std::function<refusal(const json& value, resolve_state&)> apply;
  /// Writes the option's value for --dump-config; empty: not dumped.
  std::function<void(YAML::Emitter&, const node_options&)> emit;
  /// Checks that the default is accepted by the option's own parser and equals
  /// the struct initializer; nullopt = fine.
  std::function<refusal()> check_default;

  /// The key, or the flag for flag-only options.
  std::string_view id() const { return key.empty() ? flag : key; }
  bool takes(option_sources source) const { return (sources & source) != 0; }
};

/// Every option of `lmcc node`, in the order of --help and --dump-config.
const std::vector<option_spec>& node_option_table();

/// The row for a YAML key, or nullptr.
const option_spec* find_option(std::string_view key);

/// LMCACHE_CONTROLLER_ + key in upper case.
std::string env_name(std::string_view key);

/// Rules between options, run after every layer: the legacy monitor port,
/// lmcc_none_hash against lmcc_python_hash_seed.
void apply_cross_option_rules(resolve_state& s);

/// Why lmcc_fault_injection and lmcc_planted_bug cannot be as `options` has
/// them, in a build with fault injection (`built`) or without; empty: they
/// can. apply_cross_option_rules() passes faults::built; a test build's unit
/// tests pass false to check what a release build refuses.
std::vector<std::string> fault_injection_errors(const node_options& options, bool built);

// -- building rows -------------------------------------------------------------------

/// The option's value lives in one member: access is [](auto& o) -> auto& { return o.a.b; }.
template <class Access>
struct member {
  Access access;
  static constexpr bool dumped = true;
  auto read(const node_options& o) const {
    return std::optional{std::remove_cvref_t<decltype(access(o))>(access(o))};
  }
  template <class V>
  void write(resolve_state& s, V value) const {
    access(s.options) = std::move(value);
  }
};
template <class Access>
member(Access) -> member<Access>;

/// One value kept in two members (controller_host binds HTTP and ZMQ); reads
/// nothing when they disagree, which the default check reports.
template <class First, class Second>
struct members {
  First first;
  Second second;
  static constexpr bool dumped = true;
  auto read(const node_options& o) const {
    using value_type = std::remove_cvref_t<decltype(first(o))>;
    return first(o) == second(o) ? std::optional<value_type>(first(o)) : std::nullopt;
  }
  template <class V>
  void write(resolve_state& s, V value) const {
    second(s.options) = value;
    first(s.options) = std::move(value);
  }
};
template <class First, class Second>
members(First, Second) -> members<First, Second>;

/// The value feeds a cross-option rule through the state; it is not dumped.
template <class Write>
struct into_state {
  Write write_fn;
  static constexpr bool dumped = false;
  std::nullopt_t read(const node_options&) const { return std::nullopt; }
  template <class V>
  void write(resolve_state& s, V value) const {
    write_fn(s, std::move(value));
  }
};
template <class Write>
into_state(Write) -> into_state<Write>;

/// The effective value is read from a member (and dumped), but a given value
/// goes through the state to a cross-option rule first.
template <class Access, class Write>
struct read_then_write {
  Access access;
  Write write_fn;
  static constexpr bool dumped = true;
  auto read(const node_options& o) const {
    return std::optional{std::remove_cvref_t<decltype(access(o))>(access(o))};
  }
  template <class V>
  void write(resolve_state& s, V value) const {
    write_fn(s, std::move(value));
  }
};
template <class Access, class Write>
read_then_write(Access, Write) -> read_then_write<Access, Write>;

/// A row whose value is parsed by `kind` and stored by `field`.
/// `default_value` nullopt: the option has no default (and no member to hold one).
template <class Kind, class Field>
option_spec make_option(option_names names, Kind kind, Field field,
                        std::optional<typename Kind::value_type> default_value) {
  using value_type = typename Kind::value_type;
  option_spec spec{names};
  spec.accepts = kind.accepts();
  spec.default_yaml = default_value ? emit_text(kind, *default_value) : "";
  spec.default_shown = default_value ? show_text(kind, *default_value) : "unset";
  spec.apply = [kind, field](const json& in, resolve_state& s) -> refusal {
    value_type value{};
    if (auto why = kind.parse(in, value))
      return why;
    field.write(s, std::move(value));
    return std::nullopt;
  };
  if constexpr (Field::dumped) {
    spec.emit = [kind, field](YAML::Emitter& out, const node_options& o) {
      if (auto value = field.read(o))
        kind.emit(out, *value);
      else
        out << YAML::Null;
    };
  }
  spec.check_default = [kind, field, default_value]() -> refusal {
    if (!default_value)
      return Field::dumped ? refusal("has no default in the table but is held in node_options")
                           : std::nullopt;
    std::string text = emit_text(kind, *default_value);
    value_type again{};
    if (auto why = kind.parse(yaml_to_json(YAML::Load(text)), again))
      return "the table default " + text + " is refused by its own parser: " + *why;
    if (emit_text(kind, again) != text)
      return "the table default " + text + " reads back as " + emit_text(kind, again);
    if constexpr (Field::dumped) {
      auto initial = field.read(node_options{});
      if (!initial)
        return std::string("the members it sets have different initializers");
      if (emit_text(kind, *initial) != text)
        return "the table default is " + text + " but the struct initializer is " +
               emit_text(kind, *initial);
    }
    return std::nullopt;
  };
  return spec;
}

/// A row that parses and emits by itself, for values that no kind fits.
/// default_yaml is applied to fresh node_options by the default check: it
/// must be accepted and leave the dumped value what the initializers give.
option_spec custom_option(option_names names, std::string accepts, std::string default_yaml,
                          std::function<refusal(const json&, resolve_state&)> apply,
                          std::function<void(YAML::Emitter&, const node_options&)> emit);

} // namespace lmcc::apps::config
