// EpochHolds: whether the clients of an earlier hurrayd on this state directory may still
// map memory it granted them, and the hold that this daemon's clients keep.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "hurray/ipc/owned_directory.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::daemon {

// Each daemon makes the file "clients-<epoch>" in its state directory and opens it once; a
// session that asks (SessionHello.hold_epoch) gets a descriptor of that one open file
// description, and the client keeps it for as long as it maps any memory this daemon
// granted. However the daemon ends, its own descriptor goes with it; the description lives
// on while some client still holds a descriptor of it. A later daemon asks the kernel
// whether anyone else has the file open: a write lease (fcntl F_SETLEASE, F_WRLCK) is granted
// only on a file open nowhere else. Clients cannot take the lease (they do not own the
// file), reopen the file (the state directory is the daemon's), or keep the description
// alive other than by holding it, so an earlier daemon counts as gone only once every client
// of it has closed its hold: dropped its last view of that daemon's memory, or exited.
//
// A file that nobody else holds is removed when checked. One whose lease the kernel
// refuses for another reason (a file system without leases) counts as held: its memory
// stays out of use, never reused under a reader. Not thread-safe; `hold()` may be shared.
class EpochHolds {
 public:
  // The file prefix: "clients-<epoch>".
  static constexpr std::string_view kFilePrefix = "clients-";

  // Makes this daemon's file in `directory` (which must outlive the object) and checks the
  // earlier daemons' files found there. Errors name the failed call.
  [[nodiscard]] static Result<EpochHolds> Open(const OwnedDirectory& directory,
                                               std::uint64_t epoch);

  // This daemon's hold: duplicate it (F_DUPFD_CLOEXEC) for each client that asks.
  [[nodiscard]] const std::shared_ptr<const UniqueFd>& hold() const { return hold_; }
  // Whether some earlier daemon's file may still be held.
  [[nodiscard]] bool earlier_held() const { return !earlier_.empty(); }
  // Checks the earlier daemons' files again, removing those nobody holds; returns
  // earlier_held().
  bool Recheck();

 private:
  EpochHolds(const OwnedDirectory& directory, std::shared_ptr<const UniqueFd> hold,
             std::vector<std::string> earlier)
      : directory_(&directory), hold_(std::move(hold)), earlier_(std::move(earlier)) {}

  // Whether a process other than this one has the file `name` open (or that cannot be told).
  [[nodiscard]] bool Held(const std::string& name);

  const OwnedDirectory* directory_;
  std::shared_ptr<const UniqueFd> hold_;
  std::vector<std::string> earlier_;  // Files of earlier daemons not yet found free.
  std::vector<std::string> warned_;   // Files whose lease failed for another reason, logged.
};

}  // namespace hurray::daemon
