// StateDirectory: where hurrayd keeps what outlives it (the journal), held by one daemon
// at a time.
#pragma once

#include <string>

#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// What the default state directory is chosen from (the process environment).
struct StateDirectoryEnvironment {
  std::string state_directory;  // $STATE_DIRECTORY (systemd's StateDirectory=; may list several).
  std::string xdg_state_home;   // $XDG_STATE_HOME.
  std::string home;             // $HOME.
};

[[nodiscard]] StateDirectoryEnvironment ReadStateDirectoryEnvironment();

// The state directory when the configuration names none: the first entry of
// $STATE_DIRECTORY (colon-separated), else $XDG_STATE_HOME/hurray, else
// $HOME/.local/state/hurray, else /var/lib/hurray. Only absolute paths count.
[[nodiscard]] std::string DefaultStateDirectory(const StateDirectoryEnvironment& environment);

// An open state directory: created (mode 0700, parents as needed) when missing, and locked
// (flock on its file "lock") for as long as the object lives, so that two daemons never
// share a journal or each other's segments. Move-only; the const methods are thread-safe.
class StateDirectory {
 public:
  // INVALID_ARGUMENT for a relative or empty path; FAILED_PRECONDITION "state directory X
  // is in use by another hurrayd" when another process holds its lock; other errors name the
  // failed call.
  [[nodiscard]] static Result<StateDirectory> Open(const std::string& path);

  [[nodiscard]] const std::string& path() const { return path_; }
  // "<path>/journal".
  [[nodiscard]] std::string JournalPath() const { return path_ + "/journal"; }

 private:
  StateDirectory(std::string path, UniqueFd lock)
      : path_(std::move(path)), lock_(std::move(lock)) {}

  std::string path_;
  UniqueFd lock_;  // Holds the flock.
};

}  // namespace hurray::daemon
