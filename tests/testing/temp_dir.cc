#include "testing/temp_dir.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <utility>

namespace hurray::testing {

Result<TempDir> TempDir::Create(std::string_view prefix) {
  std::string pattern = fmt::format("/tmp/{}-XXXXXX", prefix);
  if (::mkdtemp(pattern.data()) == nullptr) {
    return InternalError(
        fmt::format("mkdtemp {}: {}", pattern, std::system_category().message(errno)));
  }
  return TempDir(std::move(pattern));
}

TempDir::TempDir(TempDir&& other) noexcept
    : path_(std::exchange(other.path_, {})), keep_(other.keep_) {}

TempDir& TempDir::operator=(TempDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, {});
    keep_ = other.keep_;
  }
  return *this;
}

TempDir::~TempDir() { Remove(); }

std::string TempDir::Path(std::string_view name) const { return fmt::format("{}/{}", path_, name); }

void TempDir::Remove() {
  if (path_.empty() || keep_) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  path_.clear();
}

}  // namespace hurray::testing
