// StateDirectory: where hurrayd keeps what outlives it (the journal), held by one daemon
// at a time.
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "hurray/error.h"
#include "hurray/ipc/owned_directory.h"
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

// An open state directory: created (mode 0700, parents as needed) when missing, checked
// (OwnedDirectory, hurray/ipc/owned_directory.h: a directory, not a link, owned by the
// daemon's effective uid or root and writable by its owner only; root is no exception) and
// held open, so that the files the daemon keeps in it are reached through the directory
// that was checked; and locked (flock on its file "lock") for as long as the object lives,
// so that two daemons never share a journal or each other's segments. Move-only; the const
// methods are thread-safe.
class StateDirectory {
 public:
  // INVALID_ARGUMENT for a relative or empty path; FAILED_PRECONDITION naming the path, the
  // owner and mode found and what is required for a directory that fails the check (or is
  // a link), and "state directory X is in use by another hurrayd" when another process
  // holds its lock; other errors name the failed call.
  [[nodiscard]] static Result<StateDirectory> Open(const std::string& path);

  [[nodiscard]] const std::string& path() const { return directory_.path(); }
  // The held directory, for the files the daemon keeps there (openat, never following a
  // link).
  [[nodiscard]] const OwnedDirectory& directory() const { return directory_; }
  // The journal's file name, and "<path>/journal".
  static constexpr std::string_view kJournalName = "journal";
  [[nodiscard]] std::string JournalPath() const { return directory_.PathOf(kJournalName); }

 private:
  StateDirectory(OwnedDirectory directory, UniqueFd lock)
      : directory_(std::move(directory)), lock_(std::move(lock)) {}

  OwnedDirectory directory_;
  UniqueFd lock_;  // Holds the flock.
};

}  // namespace hurray::daemon
