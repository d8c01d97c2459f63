// TempDir: a fresh directory of its own for a test or a benchmark run, removed with
// everything in it when the TempDir is destroyed.
//
// It is made under /tmp, not $TMPDIR: a short fixed root keeps the unix socket paths placed
// in it far below sockaddr_un's 107 bytes.
//
// Move-only. Not thread-safe to move or destroy; path() and Path() may be called from any
// thread.
#pragma once

#include <string>
#include <string_view>

#include "hurray/error.h"

namespace hurray::testing {

class TempDir {
 public:
  // Makes /tmp/<prefix>-XXXXXX (mkdtemp: mode 0700, a name no other process holds).
  // INTERNAL naming the call and the errno text when it cannot be made.
  [[nodiscard]] static Result<TempDir> Create(std::string_view prefix);

  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  // Removes the directory recursively, unless Keep() was called. Errors are ignored.
  ~TempDir();

  // The directory's absolute path.
  [[nodiscard]] const std::string& path() const { return path_; }
  // "<path>/<name>".
  [[nodiscard]] std::string Path(std::string_view name) const;

  // Leaves the directory in place when this TempDir is destroyed (to inspect it).
  void Keep() { keep_ = true; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  void Remove();

  std::string path_;  // Empty once moved from.
  bool keep_ = false;
};

}  // namespace hurray::testing
