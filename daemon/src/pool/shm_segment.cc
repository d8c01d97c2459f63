#include "pool/shm_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/interprocess/exceptions.hpp>
#include <boost/interprocess/permissions.hpp>
#include <boost/interprocess/shared_memory_object.hpp>
#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <limits>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/shared_mapping.h"
#include "pool/segment_place.h"
#include "random_hex.h"

namespace hurray::daemon {
namespace {

namespace bip = boost::interprocess;

constexpr std::size_t kMaxPrefixLength = 200;
constexpr std::size_t kNameRandomBytes = 16;  // 128 bits.
constexpr unsigned kSegmentPermissions = 0600;

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23  // Linux 5.14; older C library headers lack it.
#endif

// A Boost.Interprocess failure, with the code its errno value calls for (INTERNAL when it
// carries none).
Error InterprocessError(std::string_view call, const std::string& name,
                        const bip::interprocess_exception& exception) {
  const int error_number = exception.get_native_error();
  return {error_number != 0 ? CodeForErrno(error_number) : StatusCode::kInternal,
          fmt::format("{} {}: {}", call, name, exception.what())};
}

bool IsPrefixCharacter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

// "/<prefix>-<32 lower-case hex digits>" from the kernel's random pool.
Result<std::string> RandomName(std::string_view prefix) {
  HURRAY_ASSIGN_OR_RETURN(const std::string random, RandomHex(kNameRandomBytes));
  return fmt::format("/{}-{}", prefix, random);
}

// The file of segment `name` ("/hurray-…") in `directory` ("" for /dev/shm).
std::string FilePath(std::string_view directory, std::string_view name) {
  if (directory.empty()) directory = kShmDirectory;
  // A directory that ends with '/' ("/") must not double the name's leading one.
  if (directory.ends_with('/')) directory.remove_suffix(1);
  std::string path(directory);
  path += name;
  return path;
}

// A tmpfs mounted huge=advise backs a file with transparent huge pages only where its pages
// are faulted in through a mapping advised MADV_HUGEPAGE; fallocate alone takes small pages
// (and huge=always or shmem_enabled=force take huge ones either way). Best effort: whatever
// fails here (an old kernel without MADV_POPULATE_WRITE, a full tmpfs) is left to
// fallocate, which reserves what is still missing and reports a full tmpfs.
void FaultInAsHugePages(int fd, std::uint64_t offset, std::uint64_t length) {
  const Result<SharedMapping> mapping =
      SharedMapping::Map(fd, length, PROT_READ | PROT_WRITE, "", offset);
  if (!mapping) return;
  if (::madvise(mapping->data(), length, MADV_HUGEPAGE) == 0) {
    (void)::madvise(mapping->data(), length, MADV_POPULATE_WRITE);
  }
}

}  // namespace

Status ShmSegment::ValidatePrefix(std::string_view prefix) {
  if (prefix.empty() || prefix.size() > kMaxPrefixLength) {
    return InvalidArgumentError(fmt::format("shm_prefix \"{}\": length {} is outside 1..{}", prefix,
                                            prefix.size(), kMaxPrefixLength));
  }
  for (const char c : prefix) {
    if (!IsPrefixCharacter(c)) {
      return InvalidArgumentError(
          fmt::format("shm_prefix \"{}\": character '{}' is not one of [A-Za-z0-9._-]", prefix, c));
    }
  }
  return {};
}

namespace {

// What ShmSegment::Create checks before it touches the system.
Status ValidateCreate(std::string_view prefix, std::uint64_t size, const HugePageBacking& backing) {
  HURRAY_RETURN_IF_ERROR(ShmSegment::ValidatePrefix(prefix));
  if (size == 0 || size > static_cast<std::uint64_t>(std::numeric_limits<bip::offset_t>::max())) {
    return InvalidArgumentError(fmt::format("segment size {} is outside 1..{}", size,
                                            std::numeric_limits<bip::offset_t>::max()));
  }
  if (backing.mode == HugePages::kAuto) {
    return InvalidArgumentError("huge_pages auto is not a backing: choose one first");
  }
  if (backing.mode == HugePages::kExplicit) {
    if (backing.hugetlbfs_directory.empty()) {
      return InvalidArgumentError("huge_pages explicit: hugetlbfs_directory is empty");
    }
    if (backing.page_size == 0 || size % backing.page_size != 0) {
      return InvalidArgumentError(fmt::format(
          "segment size {} is not a multiple of the huge page size {}", size, backing.page_size));
    }
  }
  return {};
}

// RESOURCE_EXHAUSTED errors of reserving memory say how much was asked for, and of what.
Error ReserveError(Error error, std::uint64_t length, std::string_view what) {
  if (error.code() != StatusCode::kResourceExhausted) return error;
  return {error.code(),
          fmt::format("cannot reserve {} bytes of {}: {}", length, what, error.message())};
}

// fallocate(2) of [offset, offset + length) of `fd`, retried on EINTR; 0 or the errno value.
// posix_fallocate is not used on hugetlbfs: where the file system lacks fallocate it falls
// back to writing, which hugetlbfs does not support.
int Fallocate(int fd, std::uint64_t offset, std::uint64_t length, bool huge_page_file) {
  if (huge_page_file) {
    while (::fallocate(fd, 0, static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
      if (errno != EINTR) return errno;
    }
    return 0;
  }
  int result = EINTR;
  while (result == EINTR) {
    result = ::posix_fallocate(fd, static_cast<off_t>(offset), static_cast<off_t>(length));
  }
  return result;
}

}  // namespace

Result<std::string> ShmSegment::NewName(std::string_view prefix) {
  HURRAY_RETURN_IF_ERROR(ValidatePrefix(prefix));
  return RandomName(prefix);
}

Result<ShmSegment> ShmSegment::Create(std::string_view prefix, std::uint64_t size,
                                      const HugePageBacking& backing) {
  HURRAY_ASSIGN_OR_RETURN(std::string name, NewName(prefix));
  return CreateNamed(std::move(name), size, backing);
}

Result<ShmSegment> ShmSegment::CreateNamed(std::string name, std::uint64_t size,
                                           const HugePageBacking& backing) {
  const std::string_view prefix = std::string_view(name).substr(1, name.rfind('-') - 1);
  HURRAY_RETURN_IF_ERROR(ValidateCreate(prefix, size, backing));
  if (backing.mode == HugePages::kExplicit) {
    return CreateFile(std::move(name), backing.hugetlbfs_directory, size);
  }

  // Boost.Interprocess throws; this is the edge where its errors become values.
  bip::shared_memory_object object;
  try {
    // create_only: O_CREAT | O_EXCL, then fchmod, so the umask cannot widen or narrow 0600.
    object = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                       bip::permissions(kSegmentPermissions));
  } catch (const bip::interprocess_exception& exception) {
    return std::unexpected(InterprocessError("shared_memory_object(create_only)", name, exception));
  }
  // From here on, a failure must remove the name again: the segment's destructor does.
  ShmSegment segment(std::move(name), std::string(), size, backing.mode);
  // Not Boost's truncate: it may reserve the pages itself (posix_fallocate), and Reserve
  // does that, chunk by chunk, when the pool asks.
  if (::ftruncate(object.get_mapping_handle().handle, static_cast<off_t>(size)) != 0) {
    return ErrnoFailure("ftruncate", segment.name_, errno);
  }
  return segment;
}

Result<ShmSegment> ShmSegment::Adopt(const std::string& path, std::uint64_t size,
                                     const HugePageBacking& backing) {
  const std::filesystem::path file(path);
  const std::string directory = file.parent_path().string();
  const bool in_shm = directory == kShmDirectory;
  if (!in_shm && (backing.mode != HugePages::kExplicit ||
                  directory != std::filesystem::path(backing.hugetlbfs_directory).string())) {
    return FailedPreconditionError(
        fmt::format("segment {}: not in /dev/shm nor in this pool's hugetlbfs directory", path));
  }
  const UniqueFd fd(::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return ErrnoFailure("open(O_RDWR)", path, errno);
  struct stat facts{};
  if (::fstat(fd.get(), &facts) != 0) return ErrnoFailure("fstat", path, errno);
  if (!S_ISREG(facts.st_mode) || facts.st_uid != ::geteuid() ||
      (facts.st_mode & 0777) != kSegmentPermissions ||
      static_cast<std::uint64_t>(facts.st_size) != size) {
    return FailedPreconditionError(fmt::format(
        "segment {}: mode {:o}, owner {}, {} bytes: not this daemon's segment of {} bytes", path,
        facts.st_mode & 0777, facts.st_uid, facts.st_size, size));
  }
  return ShmSegment("/" + file.filename().string(), in_shm ? std::string() : directory, size,
                    in_shm ? backing.mode : HugePages::kExplicit);
}

std::string ShmSegment::PathFor(std::string_view name, const HugePageBacking& backing) {
  return FilePath(backing.mode == HugePages::kExplicit ? backing.hugetlbfs_directory : "", name);
}

Status ShmSegment::RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return ErrnoFailure("unlink", path, errno);
  }
  return {};
}

Result<ShmSegment> ShmSegment::CreateFile(std::string name, const std::string& directory,
                                          std::uint64_t size) {
  const std::string path = FilePath(directory, name);
  // O_EXCL: never adopt a file someone else made; O_NOFOLLOW: never follow a planted link.
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                     kSegmentPermissions));
  if (!fd) return ErrnoFailure("open(O_CREAT | O_EXCL)", path, errno);
  // From here on, a failure must remove the file again.
  ShmSegment segment(std::move(name), directory, size, HugePages::kExplicit);
  // The umask may have narrowed the mode; it must be exactly 0600.
  if (::fchmod(fd.get(), kSegmentPermissions) != 0) {
    return ErrnoFailure("fchmod", path, errno);
  }
  if (::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return ErrnoFailure("ftruncate", path, errno);
  }
  return segment;
}

Status ShmSegment::Reserve(std::uint64_t offset, std::uint64_t length) const {
  if (length == 0 || offset > size_ || length > size_ - offset) {
    return InvalidArgumentError(fmt::format("{}: reserve offset {} length {} is outside 0..{}",
                                            name_, offset, length, size_));
  }
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd, Open(/*writable=*/true));
  if (mode_ == HugePages::kTransparent) FaultInAsHugePages(fd.get(), offset, length);
  const bool huge_page_file = mode_ == HugePages::kExplicit;
  if (const int result = Fallocate(fd.get(), offset, length, huge_page_file); result != 0) {
    return std::unexpected(ReserveError(ErrnoError("fallocate", path(), result), length,
                                        huge_page_file ? "huge pages" : "shared memory"));
  }
  return {};
}

Status ShmSegment::Release(std::uint64_t offset, std::uint64_t length) const {
  if (length == 0 || offset > size_ || length > size_ - offset) {
    return InvalidArgumentError(fmt::format("{}: release offset {} length {} is outside 0..{}",
                                            name_, offset, length, size_));
  }
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd, Open(/*writable=*/true));
  while (::fallocate(fd.get(), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                     static_cast<off_t>(offset), static_cast<off_t>(length)) != 0) {
    if (errno != EINTR) return ErrnoFailure("fallocate(PUNCH_HOLE)", path(), errno);
  }
  return {};
}

ShmSegment::ShmSegment(ShmSegment&& other) noexcept
    : name_(std::exchange(other.name_, std::string())),
      directory_(std::exchange(other.directory_, std::string())),
      size_(std::exchange(other.size_, 0)),
      mode_(other.mode_) {}

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    Remove();
    name_ = std::exchange(other.name_, std::string());
    directory_ = std::exchange(other.directory_, std::string());
    size_ = std::exchange(other.size_, 0);
    mode_ = other.mode_;
  }
  return *this;
}

ShmSegment::~ShmSegment() { Remove(); }

std::string ShmSegment::path() const { return FilePath(directory_, name_); }

void ShmSegment::Remove() noexcept {
  if (name_.empty()) return;
  if (directory_.empty()) {
    // remove() catches everything itself; the name is ours, so a failure (ENOENT because
    // some process with our uid unlinked it) leaves nothing to clean up.
    (void)bip::shared_memory_object::remove(name_.c_str());
  } else {
    // The same holds for the file; unlinking it returns its huge pages to the pool once no
    // client maps it any more.
    (void)::unlink(path().c_str());
  }
  name_.clear();
}

Result<UniqueFd> ShmSegment::Open(bool writable) const {
  const int flags = (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
  if (!directory_.empty()) {
    const std::string file = path();
    UniqueFd fd(::open(file.c_str(), flags | O_NOFOLLOW));
    if (!fd.valid()) {
      return ErrnoFailure(writable ? "open(O_RDWR)" : "open(O_RDONLY)", file, errno);
    }
    return fd;
  }
  // No mode: the object exists, O_CREAT is not given.
  UniqueFd fd(::shm_open(name_.c_str(), flags, 0));
  if (!fd.valid()) {
    return std::unexpected(
        ErrnoError(writable ? "shm_open(O_RDWR)" : "shm_open(O_RDONLY)", name_, errno));
  }
  return fd;
}

}  // namespace hurray::daemon
