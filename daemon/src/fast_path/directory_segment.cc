#include "fast_path/directory_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon::fast_path {
namespace {

// The longest record read back (a path).
constexpr std::size_t kMaxRecordBytes = 4096;

// Marks the directory segment at `segment_path` kEnded; false when it is gone, too small, or
// does not start with a directory header.
Result<bool> MarkEnded(const std::string& segment_path) {
  const UniqueFd fd(::open(segment_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return false;
    return ErrnoFailure("open", segment_path, errno);
  }
  struct stat info{};
  if (::fstat(fd.get(), &info) != 0) {
    return ErrnoFailure("fstat", segment_path, errno);
  }
  // Only a file of this daemon's user is written to.
  if (!S_ISREG(info.st_mode) || info.st_uid != ::geteuid() ||
      info.st_size < static_cast<off_t>(sizeof(DirectoryHeader))) {
    return false;
  }
  HURRAY_ASSIGN_OR_RETURN(
      const SharedMapping mapping,
      SharedMapping::Map(fd.get(), sizeof(DirectoryHeader), PROT_READ | PROT_WRITE, segment_path));
  auto* header = static_cast<DirectoryHeader*>(mapping.data());
  if (header->magic != kDirectoryMagic) return false;
  header->state.store(kEnded, std::memory_order_seq_cst);
  return true;
}

}  // namespace

Result<std::unique_ptr<DirectorySegment>> DirectorySegment::Create(std::string_view shm_prefix,
                                                                   std::uint64_t entry_count,
                                                                   std::uint64_t daemon_epoch) {
  if (entry_count == 0 || entry_count > kMaxEntries) {
    return InvalidArgumentError(
        fmt::format("fast_path.directory_entries {}: must be 1 to {}", entry_count, kMaxEntries));
  }
  const std::uint64_t size = DirectoryBytes(entry_count);
  HURRAY_ASSIGN_OR_RETURN(ShmSegment shm, ShmSegment::Create(shm_prefix, size));
  HURRAY_RETURN_IF_ERROR(shm.Reserve(0, size));  // Touching it can never raise SIGBUS.
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd, shm.Open(/*writable=*/true));
  HURRAY_ASSIGN_OR_RETURN(SharedMapping mapping,
                          SharedMapping::Map(fd.get(), size, PROT_READ | PROT_WRITE, shm.path()));
  auto* header = static_cast<DirectoryHeader*>(mapping.data());
  header->magic = kDirectoryMagic;
  header->layout_version = kLayoutVersion;
  header->entry_size = sizeof(DirectoryEntry);
  header->entry_count = entry_count;
  header->daemon_epoch = daemon_epoch;
  header->state.store(kServing, std::memory_order_seq_cst);
  return std::unique_ptr<DirectorySegment>(
      new DirectorySegment(std::move(shm), std::move(mapping), entry_count));
}

DirectorySegment::DirectorySegment(ShmSegment shm, SharedMapping mapping, std::uint64_t entry_count)
    : shm_(std::move(shm)),
      mapping_(std::move(mapping)),
      header_(static_cast<DirectoryHeader*>(mapping_.data())),
      entries_(reinterpret_cast<DirectoryEntry*>(header_ + 1)),
      entry_count_(entry_count) {
  free_.reserve(entry_count);
  for (std::uint64_t index = entry_count; index > 0; --index) free_.push_back(index - 1);
}

DirectorySegment::~DirectorySegment() { End(); }

Result<bool> DirectorySegment::EndAbandoned(const OwnedDirectory& state_directory,
                                            std::string_view record_name,
                                            const SegmentPlace& place) {
  HURRAY_ASSIGN_OR_RETURN(const std::optional<std::string> record,
                          state_directory.ReadFile(record_name, kMaxRecordBytes));
  if (!record) return false;
  bool marked = false;
  // A record that names anything but a directory segment of this daemon is only removed.
  const std::string& segment_path = *record;
  if (Status place_checked = place.Check(segment_path); !place_checked) {
    spdlog::warn("fast path: {} names no directory of this daemon, left alone: {}",
                 state_directory.PathOf(record_name), place_checked.error().message());
  } else {
    HURRAY_ASSIGN_OR_RETURN(marked, MarkEnded(segment_path));
    if (marked) HURRAY_RETURN_IF_ERROR(place.Remove(segment_path));
  }
  HURRAY_RETURN_IF_ERROR(state_directory.RemoveFile(record_name));
  return marked;
}

Status DirectorySegment::Record(const OwnedDirectory& state_directory,
                                std::string_view record_name) const {
  return state_directory.ReplaceFile(record_name, path());
}

std::optional<std::uint64_t> DirectorySegment::AllocateEntry() {
  if (free_.empty()) return std::nullopt;
  const std::uint64_t index = free_.back();
  free_.pop_back();
  return index;
}

void DirectorySegment::FreeEntry(std::uint64_t index) {
  Show(index, 0, 0);
  free_.push_back(index);
}

void DirectorySegment::Show(std::uint64_t index, std::uint64_t version_id,
                            std::uint64_t version_number) {
  WriteEntry(entries_[index], version_id, version_number);
}

void DirectorySegment::End() { header_->state.store(kEnded, std::memory_order_seq_cst); }

}  // namespace hurray::daemon::fast_path
