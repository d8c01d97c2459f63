#include "fast_path/directory_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray::daemon::fast_path {
namespace {

// Where named shm segments live: the only place a record may point to.
constexpr std::string_view kShmDirectory = "/dev/shm/";
// The longest record read back (a path).
constexpr std::size_t kMaxRecordBytes = 4096;

// The text of the file at `path`; nullopt when there is none.
Result<std::optional<std::string>> ReadRecord(const std::string& path) {
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return std::optional<std::string>();
    return std::unexpected(ErrnoError("open", path, errno));
  }
  std::string text(kMaxRecordBytes, '\0');
  const ssize_t read = ::read(fd.get(), text.data(), text.size());
  if (read < 0) return std::unexpected(ErrnoError("read", path, errno));
  text.resize(static_cast<std::size_t>(read));
  return std::optional<std::string>(std::move(text));
}

Status RemoveRecord(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return std::unexpected(ErrnoError("unlink", path, errno));
  }
  return {};
}

// Marks the directory segment at `segment_path` kEnded; false when it is gone, too small, or
// does not start with a directory header.
Result<bool> MarkEnded(const std::string& segment_path) {
  const UniqueFd fd(::open(segment_path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) {
    if (errno == ENOENT) return false;
    return std::unexpected(ErrnoError("open", segment_path, errno));
  }
  struct stat info{};
  if (::fstat(fd.get(), &info) != 0)
    return std::unexpected(ErrnoError("fstat", segment_path, errno));
  if (!S_ISREG(info.st_mode) || info.st_size < static_cast<off_t>(sizeof(DirectoryHeader))) {
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

Result<bool> DirectorySegment::EndAbandoned(const std::string& record_path) {
  HURRAY_ASSIGN_OR_RETURN(const std::optional<std::string> record, ReadRecord(record_path));
  if (!record) return false;
  bool marked = false;
  // A record that names anything but a segment file is only removed.
  const std::string& segment_path = *record;
  if (segment_path.starts_with(kShmDirectory) &&
      segment_path.find('/', kShmDirectory.size()) == std::string::npos) {
    HURRAY_ASSIGN_OR_RETURN(marked, MarkEnded(segment_path));
    if (marked) HURRAY_RETURN_IF_ERROR(ShmSegment::RemoveFile(segment_path));
  }
  HURRAY_RETURN_IF_ERROR(RemoveRecord(record_path));
  return marked;
}

Status DirectorySegment::Record(const std::string& record_path) const {
  const std::string temporary = record_path + ".new";
  const std::string text = path();
  {
    const UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return std::unexpected(ErrnoError("open", temporary, errno));
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      return std::unexpected(ErrnoError("write", temporary, errno));
    }
  }
  if (::rename(temporary.c_str(), record_path.c_str()) != 0) {
    return std::unexpected(ErrnoError("rename", record_path, errno));
  }
  return {};
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
