#include "fast_path.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fast_path_layout.h"

namespace hurray::client_internal {

// The directory and lease page of one session, mapped and checked, and the page's free
// slots. Thread-safe: the slots' list is guarded; the mappings are immutable.
class FastPathPages {
 public:
  // Asks `session` for both and maps them. FAILED_PRECONDITION or RESOURCE_EXHAUSTED as the
  // daemon refuses; INTERNAL for a grant that fails a check; the errors of fstat and mmap.
  static Result<std::shared_ptr<FastPathPages>> Open(
      std::shared_ptr<client::SessionConnection> session);

  [[nodiscard]] std::uint64_t epoch() const { return session_->daemon_epoch(); }
  // Whether the session still stands, as far as this process knows (no system call): once
  // it is closed, the daemon no longer reads its page.
  [[nodiscard]] bool session_open() const { return session_->open(); }

  // Pins `version_id` in entry `entry` in a free slot; nullopt when the entry is outside
  // the directory, no slot is free, or Pin says the version is not the latest.
  std::optional<std::uint32_t> Pin(std::uint64_t entry, std::uint64_t version_id);
  // Unpins `slot` and frees it for the next Pin.
  void Unpin(std::uint32_t slot);
  // What entry `entry` shows; nullopt outside the directory or while it is being written.
  [[nodiscard]] std::optional<fast_path::EntrySnapshot> Read(std::uint64_t entry) const;

 private:
  FastPathPages(std::shared_ptr<client::SessionConnection> session,
                std::shared_ptr<Mapping> directory, std::shared_ptr<Mapping> lease_page,
                std::uint64_t entry_count, std::uint32_t slot_count);

  const std::shared_ptr<client::SessionConnection> session_;
  const std::shared_ptr<Mapping> directory_;
  const std::shared_ptr<Mapping> lease_page_;
  const fast_path::DirectoryHeader& header_;
  const fast_path::DirectoryEntry* const entries_;
  const std::uint64_t entry_count_;
  fast_path::LeaseSlot* const slots_;

  std::mutex mutex_;
  std::vector<std::uint32_t> free_slots_;  // Guarded by mutex_.
};

namespace {

// Maps `size` bytes of `fd` (`what` names it in errors) after checking with fstat that the
// file holds them: a mapping beyond a file's end faults on first touch.
Result<std::shared_ptr<Mapping>> MapChecked(int fd, std::uint64_t size, bool writable,
                                            std::string_view what) {
  struct stat status{};
  if (::fstat(fd, &status) != 0) return ErrnoFailure("fstat", what, errno);
  if (status.st_size < 0 || static_cast<std::uint64_t>(status.st_size) < size) {
    return InternalError(fmt::format("{}: the daemon granted {} bytes of a file of {} bytes", what,
                                     size, status.st_size));
  }
  const int protection = writable ? PROT_READ | PROT_WRITE : PROT_READ;
  HURRAY_ASSIGN_OR_RETURN(SharedMapping mapped, SharedMapping::Map(fd, size, protection, what));
  return std::make_shared<Mapping>(std::move(mapped), writable, /*sealed=*/false);
}

// The directory, mapped read-only, once its grant and header check out for `epoch`.
Result<std::shared_ptr<Mapping>> MapDirectory(client::SessionConnection& session,
                                              std::uint64_t& entry_count) {
  HURRAY_ASSIGN_OR_RETURN(client::GrantedDirectory granted, session.MapDirectory());
  constexpr std::uint64_t kMostEntries =
      (std::numeric_limits<std::uint64_t>::max() - sizeof(fast_path::DirectoryHeader)) /
      sizeof(fast_path::DirectoryEntry);
  if (granted.layout_version != fast_path::kLayoutVersion || granted.entry_count > kMostEntries ||
      granted.size != fast_path::DirectoryBytes(granted.entry_count)) {
    return InternalError(fmt::format(
        "fast path directory: the daemon granted {} bytes for {} entries of layout {}; this "
        "client reads layout {}",
        granted.size, granted.entry_count, granted.layout_version, fast_path::kLayoutVersion));
  }
  HURRAY_ASSIGN_OR_RETURN(
      std::shared_ptr<Mapping> mapping,
      MapChecked(granted.fd.get(), granted.size, /*writable=*/false, "fast path directory"));
  const auto& header = *reinterpret_cast<const fast_path::DirectoryHeader*>(mapping->base());
  if (header.magic != fast_path::kDirectoryMagic ||
      header.layout_version != fast_path::kLayoutVersion ||
      header.entry_size != sizeof(fast_path::DirectoryEntry) ||
      header.entry_count != granted.entry_count || header.daemon_epoch != session.daemon_epoch()) {
    return InternalError(fmt::format(
        "fast path directory: header of magic {:#x}, layout {}, entries of {} bytes, {} "
        "entries, epoch {}; expected {:#x}, {}, {}, {}, {}",
        header.magic, header.layout_version, header.entry_size, header.entry_count,
        header.daemon_epoch, fast_path::kDirectoryMagic, fast_path::kLayoutVersion,
        sizeof(fast_path::DirectoryEntry), granted.entry_count, session.daemon_epoch()));
  }
  entry_count = granted.entry_count;
  return mapping;
}

// The session's lease page, mapped read-write, once its grant checks out.
Result<std::shared_ptr<Mapping>> MapLeasePage(client::SessionConnection& session,
                                              std::uint32_t& slot_count) {
  HURRAY_ASSIGN_OR_RETURN(client::GrantedLeasePage granted, session.MapLeasePage());
  constexpr std::size_t kMostSlots = fast_path::kLeasePageBytes / sizeof(fast_path::LeaseSlot);
  if (granted.slot_count == 0 || granted.slot_count > kMostSlots ||
      granted.size != fast_path::kLeasePageBytes) {
    return InternalError(
        fmt::format("fast path lease page: the daemon granted {} slots in {} bytes; a page has "
                    "{} bytes and 1 to {} slots",
                    granted.slot_count, granted.size, fast_path::kLeasePageBytes, kMostSlots));
  }
  slot_count = granted.slot_count;
  return MapChecked(granted.fd.get(), granted.size, /*writable=*/true, "fast path lease page");
}

}  // namespace

FastPathPages::FastPathPages(std::shared_ptr<client::SessionConnection> session,
                             std::shared_ptr<Mapping> directory,
                             std::shared_ptr<Mapping> lease_page, std::uint64_t entry_count,
                             std::uint32_t slot_count)
    : session_(std::move(session)),
      directory_(std::move(directory)),
      lease_page_(std::move(lease_page)),
      header_(*reinterpret_cast<const fast_path::DirectoryHeader*>(directory_->base())),
      entries_(reinterpret_cast<const fast_path::DirectoryEntry*>(
          directory_->base() + sizeof(fast_path::DirectoryHeader))),
      entry_count_(entry_count),
      slots_(reinterpret_cast<fast_path::LeaseSlot*>(lease_page_->base())) {
  free_slots_.reserve(slot_count);
  // Highest first, so that Pin takes slot 0 first.
  for (std::uint32_t slot = slot_count; slot > 0; --slot) free_slots_.push_back(slot - 1);
}

Result<std::shared_ptr<FastPathPages>> FastPathPages::Open(
    std::shared_ptr<client::SessionConnection> session) {
  std::uint64_t entry_count = 0;
  HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> directory, MapDirectory(*session, entry_count));
  std::uint32_t slot_count = 0;
  HURRAY_ASSIGN_OR_RETURN(std::shared_ptr<Mapping> lease_page, MapLeasePage(*session, slot_count));
  return std::shared_ptr<FastPathPages>(new FastPathPages(
      std::move(session), std::move(directory), std::move(lease_page), entry_count, slot_count));
}

std::optional<std::uint32_t> FastPathPages::Pin(std::uint64_t entry, std::uint64_t version_id) {
  if (entry >= entry_count_) return std::nullopt;
  std::uint32_t slot = 0;
  {
    std::lock_guard lock(mutex_);
    if (free_slots_.empty()) return std::nullopt;
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  if (fast_path::Pin(slots_[slot], header_, entries_[entry], version_id)) return slot;
  std::lock_guard lock(mutex_);
  free_slots_.push_back(slot);
  return std::nullopt;
}

void FastPathPages::Unpin(std::uint32_t slot) {
  fast_path::Unpin(slots_[slot]);
  std::lock_guard lock(mutex_);
  free_slots_.push_back(slot);
}

std::optional<fast_path::EntrySnapshot> FastPathPages::Read(std::uint64_t entry) const {
  if (entry >= entry_count_) return std::nullopt;
  return fast_path::ReadEntry(entries_[entry]);
}

FastPathPin::FastPathPin(std::shared_ptr<FastPathPages> pages, std::uint32_t slot)
    : pages_(std::move(pages)), slot_(slot) {}
FastPathPin::FastPathPin(FastPathPin&& other) noexcept
    : pages_(std::move(other.pages_)), slot_(other.slot_) {}
FastPathPin& FastPathPin::operator=(FastPathPin&& other) noexcept {
  if (this != &other) {
    Reset();
    pages_ = std::move(other.pages_);
    slot_ = other.slot_;
  }
  return *this;
}
FastPathPin::~FastPathPin() { Reset(); }

void FastPathPin::Reset() {
  if (pages_) pages_->Unpin(slot_);
  pages_.reset();
}

std::optional<FastPathPin> FastPath::TryPin(const DecodedTensor& tensor, bool may_open) {
  if (tensor.version_id == 0) return std::nullopt;
  std::shared_ptr<FastPathPages> pages = Pages(tensor.daemon_epoch, may_open);
  if (!pages) return std::nullopt;
  const std::optional<std::uint32_t> slot = pages->Pin(tensor.directory_entry, tensor.version_id);
  if (!slot) return std::nullopt;
  return FastPathPin(std::move(pages), *slot);
}

bool FastPath::ShowsLatest(std::uint64_t epoch, std::uint64_t entry, std::uint64_t version_id) {
  if (version_id == 0) return false;
  std::shared_ptr<FastPathPages> pages = Pages(epoch);
  if (!pages) return false;
  const std::optional<fast_path::EntrySnapshot> shown = pages->Read(entry);
  return shown && shown->version_id == version_id;
}

std::shared_ptr<FastPathPages> FastPath::Pages(std::uint64_t epoch, bool may_open) {
  std::unique_lock lock(mutex_, std::defer_lock);
  // Another thread may hold the mutex while it opens the pages (messages to the daemon):
  // a caller that must not block does without.
  if (may_open) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return nullptr;
  }
  if (pages_ && pages_->session_open()) return pages_->epoch() == epoch ? pages_ : nullptr;
  if (!may_open) return nullptr;
  // Once per session: a new session (after a restart, or after this one broke) asks again.
  auto session = connection_.CurrentSession(epoch);
  if (!session) return nullptr;
  const SessionKey key{(*session)->daemon_epoch(), (*session)->session_id()};
  if (off_for_ == key) return nullptr;
  pages_.reset();
  auto opened = FastPathPages::Open(std::move(*session));
  if (!opened) {
    off_for_ = key;
    return nullptr;
  }
  pages_ = std::move(*opened);
  return pages_;
}

}  // namespace hurray::client_internal
