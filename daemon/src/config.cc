#include "config.h"

#include <charconv>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "cpu_pool.h"
#include "hurray/ipc/socket_path.h"

namespace hurray::daemon {
namespace {

std::string Key(std::string_view table, std::string_view key) {
  return table.empty() ? std::string(key) : std::string(table) + "." + std::string(key);
}

// A size given as an integer (bytes) or a string ("4GiB").
Result<std::uint64_t> SizeOf(const toml::node& node, const std::string& key) {
  if (const auto* integer = node.as_integer()) {
    if (integer->get() < 0) {
      return InvalidArgumentError(key + ": " + std::to_string(integer->get()) +
                                  " is negative");
    }
    return static_cast<std::uint64_t>(integer->get());
  }
  if (const auto* text = node.as_string()) {
    auto size = ParseByteSize(text->get());
    if (!size) return std::unexpected(size.error().WithContext(key));
    return *size;
  }
  return InvalidArgumentError(key + " must be a size: bytes, or a string like \"4GiB\"");
}

Result<std::string> StringOf(const toml::node& node, const std::string& key) {
  if (const auto* text = node.as_string()) return text->get();
  return InvalidArgumentError(key + " must be a string");
}

Result<std::uint32_t> UnsignedOf(const toml::node& node, const std::string& key) {
  const auto* integer = node.as_integer();
  if (integer == nullptr || integer->get() < 0 || integer->get() > UINT32_MAX) {
    return InvalidArgumentError(key + " must be an integer from 0 to 4294967295");
  }
  return static_cast<std::uint32_t>(integer->get());
}

Status ApplyCpuPool(Config::CpuPool& pool, const toml::table& table) {
  for (const auto& [key_node, node] : table) {
    const std::string_view key = key_node.str();
    const std::string name = Key("cpu_pool", key);
    if (key == "capacity") {
      HURRAY_ASSIGN_OR_RETURN(pool.capacity_bytes, SizeOf(node, name));
    } else if (key == "segment_size") {
      HURRAY_ASSIGN_OR_RETURN(pool.segment_bytes, SizeOf(node, name));
    } else if (key == "page_size") {
      HURRAY_ASSIGN_OR_RETURN(pool.page_size, SizeOf(node, name));
    } else if (key == "shm_prefix") {
      HURRAY_ASSIGN_OR_RETURN(pool.shm_prefix, StringOf(node, name));
    } else if (key == "huge_pages") {
      std::string mode;
      HURRAY_ASSIGN_OR_RETURN(mode, StringOf(node, name));
      Result<HugePages> parsed = ParseHugePages(mode);
      if (!parsed) return std::unexpected(parsed.error().WithContext(name));
      pool.huge_pages = *parsed;
    } else {
      return InvalidArgumentError("unknown setting " + name);
    }
  }
  return {};
}

}  // namespace

Config DefaultConfig() {
  Config config;
  config.socket_path = DefaultDaemonSocketPath();
  config.cpu_pool.capacity_bytes = DefaultCpuPoolCapacity();
  return config;
}

Result<std::uint64_t> ParseByteSize(std::string_view text) {
  std::uint64_t number = 0;
  const char* end = text.data() + text.size();
  auto [rest, error] = std::from_chars(text.data(), end, number);
  if (error != std::errc() || rest == text.data()) {
    return InvalidArgumentError("\"" + std::string(text) + "\" is not a size");
  }
  std::string_view unit(rest, static_cast<std::size_t>(end - rest));
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  static constexpr std::pair<std::string_view, int> kUnits[] = {
      {"", 0},   {"B", 0},  {"K", 10},  {"KB", 10}, {"KiB", 10}, {"M", 20}, {"MB", 20},
      {"MiB", 20}, {"G", 30}, {"GB", 30}, {"GiB", 30}, {"T", 40}, {"TB", 40}, {"TiB", 40}};
  for (const auto& [name, shift] : kUnits) {
    if (unit == name) {
      if (shift != 0 && number > (UINT64_MAX >> shift)) {
        return InvalidArgumentError("\"" + std::string(text) + "\" overflows 64 bits");
      }
      return number << shift;
    }
  }
  return InvalidArgumentError("\"" + std::string(text) +
                              "\": unknown unit (use B, KiB, MiB, GiB or TiB)");
}

Result<Config> ApplyToml(Config base, std::string_view toml_text, std::string_view source_name) {
  toml::table document;
  try {
    document = toml::parse(toml_text, source_name);
  } catch (const toml::parse_error& error) {
    std::ostringstream message;
    message << source_name << ":" << error.source().begin.line << ":"
            << error.source().begin.column << ": " << error.description();
    return InvalidArgumentError(message.str());
  }
  for (const auto& [key_node, node] : document) {
    const std::string key(key_node.str());
    if (key == "socket") {
      HURRAY_ASSIGN_OR_RETURN(base.socket_path, StringOf(node, key));
    } else if (key == "tcp_address") {
      HURRAY_ASSIGN_OR_RETURN(base.tcp_address, StringOf(node, key));
    } else if (key == "log_level") {
      HURRAY_ASSIGN_OR_RETURN(base.log_level, StringOf(node, key));
    } else if (key == "session_quota") {
      HURRAY_ASSIGN_OR_RETURN(base.session_quota_bytes, SizeOf(node, key));
    } else if (key == "max_wait_ms") {
      HURRAY_ASSIGN_OR_RETURN(base.max_wait_ms, UnsignedOf(node, key));
    } else if (key == "max_message_size") {
      std::uint64_t size = 0;
      HURRAY_ASSIGN_OR_RETURN(size, SizeOf(node, key));
      if (size > INT32_MAX) return InvalidArgumentError(key + " is above 2 GiB");
      base.max_message_bytes = static_cast<std::uint32_t>(size);
    } else if (key == "cpu_pool") {
      const auto* table = node.as_table();
      if (table == nullptr) return InvalidArgumentError("cpu_pool must be a table");
      if (auto applied = ApplyCpuPool(base.cpu_pool, *table); !applied) {
        return std::unexpected(applied.error());
      }
    } else {
      return InvalidArgumentError("unknown setting " + key);
    }
  }
  return base;
}

Result<Config> ApplyTomlFile(Config base, const std::string& path) {
  std::ifstream file(path);
  if (!file) return NotFoundError("config file " + path + " cannot be read");
  std::ostringstream text;
  text << file.rdbuf();
  return ApplyToml(std::move(base), text.str(), path);
}

std::string ToToml(const Config& config) {
  toml::table pool{{"capacity", static_cast<std::int64_t>(config.cpu_pool.capacity_bytes)},
                   {"segment_size", static_cast<std::int64_t>(config.cpu_pool.segment_bytes)},
                   {"page_size", static_cast<std::int64_t>(config.cpu_pool.page_size)},
                   {"shm_prefix", config.cpu_pool.shm_prefix},
                   {"huge_pages", std::string(HugePagesName(config.cpu_pool.huge_pages))}};
  toml::table document{{"socket", config.socket_path},
                       {"tcp_address", config.tcp_address},
                       {"log_level", config.log_level},
                       {"session_quota", static_cast<std::int64_t>(config.session_quota_bytes)},
                       {"max_wait_ms", static_cast<std::int64_t>(config.max_wait_ms)},
                       {"max_message_size", static_cast<std::int64_t>(config.max_message_bytes)},
                       {"cpu_pool", std::move(pool)}};
  std::ostringstream out;
  out << document << "\n";
  return out.str();
}

}  // namespace hurray::daemon
