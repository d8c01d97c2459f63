// FastPath: the client's end of the fast path (hurray/ipc/fast_path_layout.h): acquiring a
// version this process decoded before by pinning it in a slot of the session's lease page,
// with no system call and no message. Private to the client module.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "connection.h"
#include "decoded_tensor.h"

namespace hurray::client_internal {

class FastPathPages;

// A version pinned by the fast path: the daemon does not free it while the pin exists.
// Destroying the pin ends it (Unpin) and gives its slot back. Move-only; one thread at a
// time (each pin has its own slot).
class FastPathPin {
 public:
  FastPathPin(std::shared_ptr<FastPathPages> pages, std::uint32_t slot);
  FastPathPin(FastPathPin&& other) noexcept;
  FastPathPin& operator=(FastPathPin&& other) noexcept;
  FastPathPin(const FastPathPin&) = delete;
  FastPathPin& operator=(const FastPathPin&) = delete;
  ~FastPathPin();

 private:
  void Reset();

  std::shared_ptr<FastPathPages> pages_;  // Null once moved from.
  std::uint32_t slot_ = 0;
};

// One Connection's fast path: for each session, on first use, the directory mapped
// read-only and the session's lease page mapped read-write (map_directory and
// map_lease_page), checked (sizes, magic, layout version, epoch); and which of the page's
// slots this process has free. When either cannot be had or fails a check, the fast path is
// off for that session, and every TryPin answers nullopt until a new session. The pages of
// an older session stay mapped while pins on them exist. Thread-safe.
class FastPath {
 public:
  explicit FastPath(Connection& connection) : connection_(connection) {}

  // Pins `tensor`'s version (its version_id, in its directory entry) when the daemon shows
  // it still as its name's latest live version, in a free slot of the current session's
  // lease page. nullopt — take the slow path — when the tensor has no fast path
  // (version_id 0), is of another epoch than the session, its entry is outside the
  // directory, the fast path is off for the session, every slot is taken, the session has
  // ended, or the version is no longer the latest (or the directory's daemon stopped).
  // With `may_open` false, nullopt also when the session's pages are not open yet (opening
  // them asks the daemon): the pin then makes no system call at all.
  [[nodiscard]] std::optional<FastPathPin> TryPin(const DecodedTensor& tensor,
                                                  bool may_open = true);

  // Whether entry `entry` of epoch `epoch`'s directory shows version identity `version_id`
  // (AcquireResponse fields 4 and 5): the version is its name's latest live one. False when
  // the fast path cannot tell.
  [[nodiscard]] bool ShowsLatest(std::uint64_t epoch, std::uint64_t entry,
                                 std::uint64_t version_id);

 private:
  // The current session's pages, opened on first use when `may_open`; null when the fast
  // path is off for it (or the session is gone, or they are not open and may not be, or,
  // without `may_open`, another thread holds the mutex).
  std::shared_ptr<FastPathPages> Pages(std::uint64_t epoch, bool may_open = true);

  Connection& connection_;
  std::mutex mutex_;
  // The current session's pages, or null. Guarded by mutex_.
  std::shared_ptr<FastPathPages> pages_;
  // A session: its daemon epoch and its id.
  using SessionKey = std::pair<std::uint64_t, std::uint64_t>;
  // The session the fast path is off for (its pages could not be had), or {0, 0}. Guarded
  // by mutex_.
  SessionKey off_for_{0, 0};
};

}  // namespace hurray::client_internal
