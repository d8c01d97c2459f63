#include "config.h"

#include <fmt/format.h>
#include <spdlog/common.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <fstream>
#include <sstream>

#include "hurray/ipc/socket_path.h"
#include "journal/journal_sync.h"
#include "journal/state_directory.h"
#include "metrics/metrics_address.h"
#include "pool/cpu_pool.h"
#include "registry/tensor_name.h"

namespace hurray::daemon {
namespace {

// `result`, its error prefixed with the name of the setting or flag that gave the value.
template <typename T>
Result<T> Named(std::string_view name, Result<T> result) {
  if (!result) return std::unexpected(result.error().WithContext(name));
  return result;
}

Result<std::string> ParseLogLevel(std::string_view text) {
  if (spdlog::level::from_str(std::string(text)) == spdlog::level::off && text != "off") {
    return InvalidArgumentError(fmt::format(
        "\"{}\" is not a level: trace, debug, info, warn, error, critical or off", text));
  }
  return std::string(text);
}

// ---- Readers of TOML values: each names `key` in its errors. ----

// A size given as an integer (bytes) or a string ("4GiB").
Result<std::uint64_t> SizeOf(const toml::node& node, const std::string& key) {
  if (const auto* integer = node.as_integer()) {
    if (integer->get() < 0) {
      return InvalidArgumentError(fmt::format("{}: {} is negative", key, integer->get()));
    }
    return static_cast<std::uint64_t>(integer->get());
  }
  if (const auto* text = node.as_string()) return Named(key, ParseByteSize(text->get()));
  return InvalidArgumentError(
      fmt::format("{} must be a size: bytes, or a string like \"4GiB\"", key));
}

Result<std::uint64_t> PositiveSizeOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::uint64_t size, SizeOf(node, key));
  if (size == 0) return InvalidArgumentError(fmt::format("{} must be above 0", key));
  return size;
}

Result<bool> BoolOf(const toml::node& node, const std::string& key) {
  if (const auto* value = node.as_boolean()) return value->get();
  return InvalidArgumentError(fmt::format("{} must be true or false", key));
}

Result<std::uint32_t> MessageSizeOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::uint64_t size, SizeOf(node, key));
  if (size > INT32_MAX) return InvalidArgumentError(fmt::format("{} is above 2 GiB", key));
  return static_cast<std::uint32_t>(size);
}

Result<std::string> StringOf(const toml::node& node, const std::string& key) {
  if (const auto* text = node.as_string()) return text->get();
  return InvalidArgumentError(fmt::format("{} must be a string", key));
}

template <std::uint32_t kMin, std::uint32_t kMax>
Result<std::uint32_t> UnsignedIn(const toml::node& node, const std::string& key) {
  const auto* integer = node.as_integer();
  if (integer == nullptr || integer->get() < kMin || integer->get() > kMax) {
    return InvalidArgumentError(
        fmt::format("{} must be an integer from {} to {}", key, kMin, kMax));
  }
  return static_cast<std::uint32_t>(integer->get());
}

// Permission bits as an octal string ("0660") or an integer (0o660 in TOML).
Result<std::uint32_t> ModeOf(const toml::node& node, const std::string& key) {
  if (const auto* integer = node.as_integer()) {
    if (integer->get() < 0 || integer->get() > 0777) {
      return InvalidArgumentError(fmt::format(
          "{}: {} is not a mode from 0 to 0777 (write it as a string, \"0660\", or as 0o660)", key,
          integer->get()));
    }
    return static_cast<std::uint32_t>(integer->get());
  }
  if (const auto* text = node.as_string()) return Named(key, ParseFileMode(text->get()));
  return InvalidArgumentError(fmt::format("{} must be a mode: a string like \"0660\"", key));
}

Result<std::string> LogLevelOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::string text, StringOf(node, key));
  return Named(key, ParseLogLevel(text));
}

Result<LogFormat> LogFormatOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::string text, StringOf(node, key));
  return Named(key, ParseLogFormat(text));
}

Result<HugePages> HugePagesOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::string text, StringOf(node, key));
  return Named(key, ParseHugePages(text));
}

Result<JournalSync> JournalSyncOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(const std::string text, StringOf(node, key));
  return Named(key, ParseJournalSync(text));
}

// A TCP host:port (ParseTcpAddress), or empty.
Result<std::string> TcpAddressOf(const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(std::string text, StringOf(node, key));
  if (!text.empty()) HURRAY_RETURN_IF_ERROR(ParseTcpAddress(text, key));
  return text;
}

// An array of strings.
Result<std::vector<std::string>> StringsOf(const toml::node& node, const std::string& key) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    return InvalidArgumentError(fmt::format("{} must be an array of strings", key));
  }
  std::vector<std::string> strings;
  for (std::size_t i = 0; i < array->size(); ++i) {
    HURRAY_ASSIGN_OR_RETURN(std::string text,
                            StringOf(*array->get(i), fmt::format("{}[{}]", key, i)));
    strings.push_back(std::move(text));
  }
  return strings;
}

// ---- The settings of the file ----

using Apply = Status (*)(Config& config, const toml::node& node, const std::string& key);

template <auto kMember, auto kRead>
Status Assign(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.*kMember, kRead(node, key));
  return {};
}

template <auto kMember, auto kRead>
Status AssignCpuPool(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.cpu_pool.*kMember, kRead(node, key));
  return {};
}

template <auto kMember, auto kRead>
Status AssignSealedPool(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.sealed_pool.*kMember, kRead(node, key));
  return {};
}

template <auto kMember, auto kRead>
Status AssignUidQuota(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.uid_quota.*kMember, kRead(node, key));
  return {};
}

template <auto kMember, auto kRead>
Status AssignCudaPool(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.cuda_pool.*kMember, kRead(node, key));
  return {};
}

template <auto kMember, auto kRead>
Status AssignFastPath(Config& config, const toml::node& node, const std::string& key) {
  HURRAY_ASSIGN_OR_RETURN(config.fast_path.*kMember, kRead(node, key));
  return {};
}

struct Setting {
  std::string_view key;  // As a message names it: "cpu_pool.capacity".
  Apply apply;
};

constexpr Setting kSettings[] = {
    {"socket", Assign<&Config::socket_path, StringOf>},
    {"tcp_address", Assign<&Config::tcp_address, TcpAddressOf>},
    {"log_level", Assign<&Config::log_level, LogLevelOf>},
    {"log_format", Assign<&Config::log_format, LogFormatOf>},
    {"socket_mode", Assign<&Config::socket_mode, ModeOf>},
    {"session_socket_mode", Assign<&Config::session_socket_mode, ModeOf>},
    {"socket_directory_mode", Assign<&Config::socket_directory_mode, ModeOf>},
    {"session_quota", Assign<&Config::session_quota_bytes, SizeOf>},
    {"max_sessions", Assign<&Config::max_sessions, UnsignedIn<0, UINT32_MAX>>},
    {"max_sessions_per_uid", Assign<&Config::max_sessions_per_uid, UnsignedIn<0, UINT32_MAX>>},
    {"hello_timeout_ms", Assign<&Config::hello_timeout_ms, UnsignedIn<0, UINT32_MAX>>},
    {"frame_timeout_ms", Assign<&Config::frame_timeout_ms, UnsignedIn<0, UINT32_MAX>>},
    {"max_grpc_connections", Assign<&Config::max_grpc_connections, UnsignedIn<0, UINT32_MAX>>},
    {"max_grpc_connections_per_uid",
     Assign<&Config::max_grpc_connections_per_uid, UnsignedIn<0, UINT32_MAX>>},
    {"reserved_descriptors", Assign<&Config::reserved_descriptors, UnsignedIn<0, 1'000'000>>},
    {"uid_quota.pending_bytes", AssignUidQuota<&UidQuota::pending_bytes, SizeOf>},
    {"uid_quota.published_bytes", AssignUidQuota<&UidQuota::published_bytes, SizeOf>},
    {"uid_quota.leases", AssignUidQuota<&UidQuota::leases, UnsignedIn<0, UINT32_MAX>>},
    {"max_wait_ms", Assign<&Config::max_wait_ms, UnsignedIn<0, UINT32_MAX>>},
    {"max_message_size", Assign<&Config::max_message_bytes, MessageSizeOf>},
    {"max_batch_names", Assign<&Config::max_batch_names, UnsignedIn<1, UINT32_MAX>>},
    {"max_waits_per_uid", Assign<&Config::max_waits_per_uid, UnsignedIn<0, UINT32_MAX>>},
    {"watch_queue_length", Assign<&Config::watch_queue_length, UnsignedIn<1, UINT32_MAX>>},
    {"watch_queue_bytes", Assign<&Config::watch_queue_bytes, PositiveSizeOf>},
    {"max_watchers", Assign<&Config::max_watchers, UnsignedIn<0, UINT32_MAX>>},
    {"max_watchers_per_uid", Assign<&Config::max_watchers_per_uid, UnsignedIn<0, UINT32_MAX>>},
    {"io_threads", Assign<&Config::io_threads, UnsignedIn<1, kMaxIoThreads>>},
    {"shutdown_grace_ms", Assign<&Config::shutdown_grace_ms, UnsignedIn<0, UINT32_MAX>>},
    {"cpu_pool.capacity", AssignCpuPool<&Config::CpuPool::capacity_bytes, SizeOf>},
    {"cpu_pool.segment_size", AssignCpuPool<&Config::CpuPool::segment_bytes, SizeOf>},
    {"cpu_pool.page_size", AssignCpuPool<&Config::CpuPool::page_size, SizeOf>},
    {"cpu_pool.shm_prefix", AssignCpuPool<&Config::CpuPool::shm_prefix, StringOf>},
    {"cpu_pool.huge_pages", AssignCpuPool<&Config::CpuPool::huge_pages, HugePagesOf>},
    {"cpu_pool.namespaces", AssignCpuPool<&Config::CpuPool::namespaces, StringsOf>},
    {"cuda_pool.enabled", AssignCudaPool<&Config::CudaPool::enabled, BoolOf>},
    {"cuda_pool.capacity", AssignCudaPool<&Config::CudaPool::capacity_bytes, SizeOf>},
    {"cuda_pool.slab_size", AssignCudaPool<&Config::CudaPool::slab_bytes, PositiveSizeOf>},
    {"cuda_pool.idle_slab_release_ms",
     AssignCudaPool<&Config::CudaPool::idle_slab_release_ms, UnsignedIn<0, UINT32_MAX>>},
    {"cuda_pool.namespaces", AssignCudaPool<&Config::CudaPool::namespaces, StringsOf>},
    {"sealed_pool.capacity", AssignSealedPool<&Config::SealedPool::capacity_bytes, SizeOf>},
    {"sealed_pool.max_buffers",
     AssignSealedPool<&Config::SealedPool::max_buffers, UnsignedIn<1, UINT32_MAX>>},
    {"sealed_pool.namespaces", AssignSealedPool<&Config::SealedPool::namespaces, StringsOf>},
    {"fast_path.enabled", AssignFastPath<&Config::FastPath::enabled, BoolOf>},
    {"fast_path.directory_entries",
     AssignFastPath<&Config::FastPath::directory_entries, UnsignedIn<1, kMaxDirectoryEntries>>},
    {"fast_path.lease_slots",
     AssignFastPath<&Config::FastPath::lease_slots, UnsignedIn<1, kMaxLeaseSlots>>},
    {"fast_path.rescan_interval_ms",
     AssignFastPath<&Config::FastPath::rescan_interval_ms, UnsignedIn<1, 60'000>>},
    {"fast_path.max_entries_per_uid",
     AssignFastPath<&Config::FastPath::max_entries_per_uid, UnsignedIn<0, kMaxDirectoryEntries>>},
    {"socket_group", Assign<&Config::socket_group, StringOf>},
    {"metrics_address", Assign<&Config::metrics_address, TcpAddressOf>},
    {"state_directory", Assign<&Config::state_directory, StringOf>},
    {"journal_sync", Assign<&Config::journal_sync, JournalSyncOf>},
};

// The tables a file may hold; their settings are in kSettings as "table.key".
constexpr std::string_view kTables[] = {"cpu_pool", "cuda_pool", "sealed_pool", "uid_quota",
                                        "fast_path"};

// One [[preload]] table; `field` is "preload[i]".
Result<Config::Preload> PreloadOf(const toml::table& table, const std::string& field) {
  Config::Preload entry;
  bool has_path = false;
  for (const auto& [key_node, node] : table) {
    const std::string key = fmt::format("{}.{}", field, key_node.str());
    if (key_node.str() == "path") {
      HURRAY_ASSIGN_OR_RETURN(entry.path, StringOf(node, key));
      has_path = true;
    } else if (key_node.str() == "prefix") {
      HURRAY_ASSIGN_OR_RETURN(entry.prefix, StringOf(node, key));
      HURRAY_RETURN_IF_ERROR(ValidatePreloadPrefix(entry.prefix, key));
    } else if (key_node.str() == "pool") {
      HURRAY_ASSIGN_OR_RETURN(entry.pool, StringOf(node, key));
      if (entry.pool.empty()) return InvalidArgumentError(fmt::format("{} is empty", key));
    } else if (key_node.str() == "required") {
      HURRAY_ASSIGN_OR_RETURN(entry.required, BoolOf(node, key));
    } else {
      return InvalidArgumentError(fmt::format("unknown setting {}", key));
    }
  }
  if (!has_path || entry.path.empty()) {
    return InvalidArgumentError(fmt::format("{}.path is missing or empty", field));
  }
  return entry;
}

// The [[preload]] array of tables: it replaces any entries `config` had.
Status ApplyPreload(Config& config, const toml::node& node) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    return InvalidArgumentError("preload must be an array of tables: [[preload]]");
  }
  std::vector<Config::Preload> entries;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string field = fmt::format("preload[{}]", i);
    const auto* table = array->get(i)->as_table();
    if (table == nullptr) return InvalidArgumentError(fmt::format("{} must be a table", field));
    HURRAY_ASSIGN_OR_RETURN(Config::Preload entry, PreloadOf(*table, field));
    entries.push_back(std::move(entry));
  }
  config.preload = std::move(entries);
  return {};
}

// One [[namespace]] table; `field` is "namespace[i]".
Result<AccessPolicy::RuleSpec> NamespaceRuleOf(const toml::table& table, const std::string& field) {
  AccessPolicy::RuleSpec rule;
  for (const auto& [key_node, node] : table) {
    const std::string key = fmt::format("{}.{}", field, key_node.str());
    if (key_node.str() == "pattern") {
      HURRAY_ASSIGN_OR_RETURN(rule.pattern, StringOf(node, key));
    } else if (key_node.str() == "publish") {
      HURRAY_ASSIGN_OR_RETURN(rule.publish, StringsOf(node, key));
    } else if (key_node.str() == "read") {
      HURRAY_ASSIGN_OR_RETURN(rule.read, StringsOf(node, key));
    } else if (key_node.str() == "delete") {
      HURRAY_ASSIGN_OR_RETURN(rule.remove, StringsOf(node, key));
    } else {
      return InvalidArgumentError(fmt::format("unknown setting {}", key));
    }
  }
  if (rule.pattern.empty()) {
    return InvalidArgumentError(fmt::format("{}.pattern is missing or empty", field));
  }
  return rule;
}

// The [[namespace]] array of tables: it replaces any rules `config` had.
Status ApplyNamespaceRules(Config& config, const toml::node& node) {
  const auto* array = node.as_array();
  if (array == nullptr) {
    return InvalidArgumentError("namespace must be an array of tables: [[namespace]]");
  }
  std::vector<AccessPolicy::RuleSpec> rules;
  for (std::size_t i = 0; i < array->size(); ++i) {
    const std::string field = fmt::format("namespace[{}]", i);
    const auto* table = array->get(i)->as_table();
    if (table == nullptr) return InvalidArgumentError(fmt::format("{} must be a table", field));
    HURRAY_ASSIGN_OR_RETURN(AccessPolicy::RuleSpec rule, NamespaceRuleOf(*table, field));
    rules.push_back(std::move(rule));
  }
  config.namespace_rules = std::move(rules);
  return {};
}

// Applies the settings of `table`, the whole document when `table_name` is empty.
Status ApplyTable(Config& config, const toml::table& table, std::string_view table_name) {
  for (const auto& [key_node, node] : table) {
    const std::string_view name = key_node.str();
    const std::string key =
        table_name.empty() ? std::string(name) : fmt::format("{}.{}", table_name, name);
    if (table_name.empty() && name == "preload") {
      HURRAY_RETURN_IF_ERROR(ApplyPreload(config, node));
      continue;
    }
    if (table_name.empty() && name == "namespace") {
      HURRAY_RETURN_IF_ERROR(ApplyNamespaceRules(config, node));
      continue;
    }
    if (table_name.empty() && std::ranges::find(kTables, name) != std::end(kTables)) {
      const auto* inner = node.as_table();
      if (inner == nullptr) return InvalidArgumentError(fmt::format("{} must be a table", key));
      HURRAY_RETURN_IF_ERROR(ApplyTable(config, *inner, key));
      continue;
    }
    const auto* setting = std::ranges::find(kSettings, key, &Setting::key);
    // A quoted key with a dot ("cpu_pool.capacity" = 1) names no setting.
    if (setting == std::end(kSettings) || name.find('.') != std::string_view::npos) {
      return InvalidArgumentError(fmt::format("unknown setting {}", key));
    }
    HURRAY_RETURN_IF_ERROR(setting->apply(config, node, key));
  }
  return {};
}

toml::array TomlStrings(const std::vector<std::string>& strings) {
  toml::array array;
  for (const std::string& text : strings) array.push_back(text);
  return array;
}

// ---- The command line ----

// hurrayd's flags as given; an empty string is a flag not given.
struct Flags {
  std::string config_file;
  std::string socket;
  std::string log_level;
  std::string cpu_pool_capacity;
  std::string cpu_pool_huge_pages;
  bool print_config = false;
  bool check_config = false;
  bool discard_state = false;
};

void AddFlags(CLI::App& app, Flags& flags) {
  app.add_option("--config", flags.config_file, "TOML configuration file");
  app.add_option("--socket", flags.socket, "gRPC unix socket path (session socket: PATH.session)");
  app.add_option("--log-level", flags.log_level,
                 "trace, debug, info, warn, error, critical or off");
  app.add_option("--cpu-pool-capacity", flags.cpu_pool_capacity, "CPU pool size, e.g. 4GiB");
  app.add_option("--cpu-pool-huge-pages", flags.cpu_pool_huge_pages,
                 "Huge pages for the CPU pool: off, transparent, explicit or auto");
  app.add_flag("--print-config", flags.print_config, "Print the effective configuration and exit");
  app.add_flag("--check-config", flags.check_config,
               "Check the configuration, explain its access policy and exit");
  app.add_flag("--discard-state", flags.discard_state,
               "Remove the journal of state_directory and the segments it keeps, and exit");
}

// `config` with the flags that were given applied over it.
Result<Config> MergeFlags(Config config, const Flags& flags) {
  if (!flags.socket.empty()) config.socket_path = flags.socket;
  if (!flags.log_level.empty()) {
    HURRAY_ASSIGN_OR_RETURN(config.log_level, Named("--log-level", ParseLogLevel(flags.log_level)));
  }
  if (!flags.cpu_pool_capacity.empty()) {
    HURRAY_ASSIGN_OR_RETURN(config.cpu_pool.capacity_bytes,
                            Named("--cpu-pool-capacity", ParseByteSize(flags.cpu_pool_capacity)));
  }
  if (!flags.cpu_pool_huge_pages.empty()) {
    HURRAY_ASSIGN_OR_RETURN(
        config.cpu_pool.huge_pages,
        Named("--cpu-pool-huge-pages", ParseHugePages(flags.cpu_pool_huge_pages)));
  }
  return config;
}

}  // namespace

Config DefaultConfig() {
  Config config;
  config.socket_path = DefaultDaemonSocketPath();
  config.cpu_pool.capacity_bytes = DefaultCpuPoolCapacity();
  config.state_directory = DefaultStateDirectory(ReadStateDirectoryEnvironment());
  return config;
}

Result<std::uint64_t> ParseByteSize(std::string_view text) {
  std::uint64_t number = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [rest, error] = std::from_chars(begin, end, number);
  if (error != std::errc() || rest == begin) {
    return InvalidArgumentError(fmt::format("\"{}\" is not a size", text));
  }
  std::string_view unit(rest, static_cast<std::size_t>(end - rest));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::pair<std::string_view, int> kUnits[] = {
      {"", 0},     {"B", 0},  {"K", 10},  {"KB", 10},  {"KiB", 10}, {"M", 20},  {"MB", 20},
      {"MiB", 20}, {"G", 30}, {"GB", 30}, {"GiB", 30}, {"T", 40},   {"TB", 40}, {"TiB", 40}};
  for (const auto& [name, shift] : kUnits) {
    if (unit == name) {
      if (shift != 0 && number > (UINT64_MAX >> shift)) {
        return InvalidArgumentError(fmt::format("\"{}\" overflows 64 bits", text));
      }
      return number << shift;
    }
  }
  return InvalidArgumentError(
      fmt::format("\"{}\": unknown unit (use B, KiB, MiB, GiB or TiB)", text));
}

Result<std::uint32_t> ParseFileMode(std::string_view text) {
  std::uint32_t mode = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [rest, error] = std::from_chars(begin, end, mode, 8);
  if (text.empty() || error != std::errc() || rest != end) {
    return InvalidArgumentError(fmt::format(R"("{}" is not an octal mode like "0660")", text));
  }
  if (mode > 0777) return InvalidArgumentError(fmt::format("\"{}\" is above 0777", text));
  return mode;
}

Status ValidatePreloadPrefix(std::string_view prefix, std::string_view field) {
  if (prefix.empty()) return {};
  if (auto named = ValidateTensorName(fmt::format("{}x", prefix), "it, followed by a name,");
      !named) {
    return InvalidArgumentError(fmt::format(
        "{} \"{}\" is not the start of a tensor name (\"namespace/\", then optionally more of "
        "a name): {}",
        field, prefix, named.error().message()));
  }
  return {};
}

Result<Config> ApplyToml(Config base, std::string_view toml_text, std::string_view source_name) {
  toml::table document;
  try {
    document = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    return InvalidArgumentError(fmt::format("{}:{}:{}: {}", source_name, error.source().begin.line,
                                            error.source().begin.column, error.description()));
  }
  HURRAY_RETURN_IF_ERROR(ApplyTable(base, document, ""));
  HURRAY_RETURN_IF_ERROR(MakeAccessPolicy(base));  // Resolves user and group names now.
  return base;
}

Result<Config> ApplyTomlFile(Config base, const std::string& path) {
  std::ifstream file(path);
  if (!file) return NotFoundError(fmt::format("config file {} cannot be read", path));
  std::ostringstream text;
  text << file.rdbuf();
  return ApplyToml(std::move(base), text.str(), path);
}

Result<Invocation> LoadConfig(int argc, const char* const* argv) {
  CLI::App app{"hurrayd: zero-copy tensor exchange between processes"};
  Flags flags;
  AddFlags(app, flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success&) {  // --help
    return Invocation{.config = Config{}, .output = app.help()};
  } catch (const CLI::ParseError& error) {
    return InvalidArgumentError(fmt::format("{} (hurrayd --help lists the flags)", error.what()));
  }
  Config config = DefaultConfig();
  if (!flags.config_file.empty()) {
    HURRAY_ASSIGN_OR_RETURN(config, ApplyTomlFile(std::move(config), flags.config_file));
  }
  HURRAY_ASSIGN_OR_RETURN(config, MergeFlags(std::move(config), flags));
  Invocation invocation{.config = std::move(config), .output = std::nullopt};
  if (flags.print_config) invocation.output = ToToml(invocation.config);
  if (flags.check_config) {
    HURRAY_ASSIGN_OR_RETURN(const AccessPolicy policy, MakeAccessPolicy(invocation.config));
    std::string warnings;
    for (const std::string& warning : ConfigWarnings(invocation.config)) {
      warnings += fmt::format("warning: {}\n", warning);
    }
    invocation.output = fmt::format("configuration OK\n{}{}", warnings, policy.Explain());
  }
  invocation.discard_state = flags.discard_state;
  return invocation;
}

namespace {

std::int64_t TomlInteger(std::uint64_t value) { return static_cast<std::int64_t>(value); }

// The pool tables and [uid_quota] of ToToml.
toml::table CpuPoolToml(const Config::CpuPool& pool) {
  return toml::table{{"capacity", TomlInteger(pool.capacity_bytes)},
                     {"segment_size", TomlInteger(pool.segment_bytes)},
                     {"page_size", TomlInteger(pool.page_size)},
                     {"shm_prefix", pool.shm_prefix},
                     {"huge_pages", std::string(HugePagesName(pool.huge_pages))},
                     {"namespaces", TomlStrings(pool.namespaces)}};
}

toml::table CudaPoolToml(const Config::CudaPool& pool) {
  return toml::table{{"enabled", pool.enabled},
                     {"capacity", TomlInteger(pool.capacity_bytes)},
                     {"slab_size", TomlInteger(pool.slab_bytes)},
                     {"idle_slab_release_ms", TomlInteger(pool.idle_slab_release_ms)},
                     {"namespaces", TomlStrings(pool.namespaces)}};
}

toml::table SealedPoolToml(const Config::SealedPool& pool) {
  return toml::table{{"capacity", TomlInteger(pool.capacity_bytes)},
                     {"max_buffers", TomlInteger(pool.max_buffers)},
                     {"namespaces", TomlStrings(pool.namespaces)}};
}

toml::table FastPathToml(const Config::FastPath& fast_path) {
  return toml::table{{"enabled", fast_path.enabled},
                     {"directory_entries", TomlInteger(fast_path.directory_entries)},
                     {"lease_slots", TomlInteger(fast_path.lease_slots)},
                     {"rescan_interval_ms", TomlInteger(fast_path.rescan_interval_ms)},
                     {"max_entries_per_uid", TomlInteger(fast_path.max_entries_per_uid)}};
}

toml::table UidQuotaToml(const UidQuota& quota) {
  return toml::table{{"pending_bytes", TomlInteger(quota.pending_bytes)},
                     {"published_bytes", TomlInteger(quota.published_bytes)},
                     {"leases", TomlInteger(quota.leases)}};
}

// The [[preload]] and [[namespace]] arrays of ToToml, inserted when not empty.
void InsertArrays(const Config& config, toml::table& document) {
  if (!config.preload.empty()) {
    toml::array preload;
    for (const Config::Preload& entry : config.preload) {
      preload.push_back(toml::table{{"path", entry.path},
                                    {"prefix", entry.prefix},
                                    {"pool", entry.pool},
                                    {"required", entry.required}});
    }
    document.insert("preload", std::move(preload));
  }
  if (!config.namespace_rules.empty()) {
    toml::array rules;
    for (const AccessPolicy::RuleSpec& rule : config.namespace_rules) {
      rules.push_back(toml::table{{"pattern", rule.pattern},
                                  {"publish", TomlStrings(rule.publish)},
                                  {"read", TomlStrings(rule.read)},
                                  {"delete", TomlStrings(rule.remove)}});
    }
    document.insert("namespace", std::move(rules));
  }
}

}  // namespace

std::string ToToml(const Config& config) {
  const auto integer = TomlInteger;
  const auto mode = [](std::uint32_t bits) { return fmt::format("{:04o}", bits); };
  toml::table document{
      {"socket", config.socket_path},
      {"tcp_address", config.tcp_address},
      {"log_level", config.log_level},
      {"log_format", std::string(LogFormatName(config.log_format))},
      {"socket_mode", mode(config.socket_mode)},
      {"session_socket_mode", mode(config.session_socket_mode)},
      {"socket_directory_mode", mode(config.socket_directory_mode)},
      {"session_quota", integer(config.session_quota_bytes)},
      {"max_sessions", integer(config.max_sessions)},
      {"max_sessions_per_uid", integer(config.max_sessions_per_uid)},
      {"hello_timeout_ms", integer(config.hello_timeout_ms)},
      {"frame_timeout_ms", integer(config.frame_timeout_ms)},
      {"max_grpc_connections", integer(config.max_grpc_connections)},
      {"max_grpc_connections_per_uid", integer(config.max_grpc_connections_per_uid)},
      {"reserved_descriptors", integer(config.reserved_descriptors)},
      {"max_wait_ms", integer(config.max_wait_ms)},
      {"max_message_size", integer(config.max_message_bytes)},
      {"max_batch_names", integer(config.max_batch_names)},
      {"max_waits_per_uid", integer(config.max_waits_per_uid)},
      {"watch_queue_length", integer(config.watch_queue_length)},
      {"watch_queue_bytes", integer(config.watch_queue_bytes)},
      {"max_watchers", integer(config.max_watchers)},
      {"max_watchers_per_uid", integer(config.max_watchers_per_uid)},
      {"io_threads", integer(config.io_threads)},
      {"shutdown_grace_ms", integer(config.shutdown_grace_ms)},
      {"cpu_pool", CpuPoolToml(config.cpu_pool)},
      {"cuda_pool", CudaPoolToml(config.cuda_pool)},
      {"sealed_pool", SealedPoolToml(config.sealed_pool)},
      {"uid_quota", UidQuotaToml(config.uid_quota)},
      {"fast_path", FastPathToml(config.fast_path)},
      {"socket_group", config.socket_group},
      {"metrics_address", config.metrics_address},
      {"state_directory", config.state_directory},
      {"journal_sync", std::string(JournalSyncName(config.journal_sync))}};
  InsertArrays(config, document);
  std::ostringstream out;
  out << document << "\n";
  return out.str();
}

}  // namespace hurray::daemon
