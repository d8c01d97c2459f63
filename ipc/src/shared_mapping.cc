#include "hurray/ipc/shared_mapping.h"

#include <sys/mman.h>
#include <sys/types.h>

#include <cerrno>
#include <utility>

#include "hurray/ipc/errno_error.h"

namespace hurray {

Result<SharedMapping> SharedMapping::Map(int fd, std::size_t size, int prot, std::string_view what,
                                         std::uint64_t offset) {
  void* data = ::mmap(nullptr, size, prot, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (data == MAP_FAILED) return ErrnoFailure("mmap", what, errno);
  return SharedMapping(data, size);
}

SharedMapping::SharedMapping(SharedMapping&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

SharedMapping& SharedMapping::operator=(SharedMapping&& other) noexcept {
  if (this != &other) {
    Unmap();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

SharedMapping::~SharedMapping() { Unmap(); }

void SharedMapping::Unmap() noexcept {
  if (data_ != nullptr) ::munmap(data_, size_);
  data_ = nullptr;
}

}  // namespace hurray
