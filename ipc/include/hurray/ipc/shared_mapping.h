// SharedMapping: one MAP_SHARED mapping of a descriptor, unmapped on destruction. The one
// owner of an mmap of a shared file in the tree: the daemon's pool segments, fence segments
// and fast-path pages, the preload's segments, and the client's segments and directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hurray/error.h"

namespace hurray {

// `size` bytes of the file behind `fd` from `offset` (a multiple of the page size), mapped
// shared with protection `prot` (PROT_READ, or PROT_READ | PROT_WRITE). Move-only; not
// thread-safe to move or destroy, while the mapped bytes are as thread-safe as what is
// stored in them.
class SharedMapping {
 public:
  // `what` names the file in the error of a failed mmap (as hurray/ipc/errno_error.h).
  [[nodiscard]] static Result<SharedMapping> Map(int fd, std::size_t size, int prot,
                                                 std::string_view what, std::uint64_t offset = 0);

  SharedMapping(SharedMapping&& other) noexcept;
  SharedMapping& operator=(SharedMapping&& other) noexcept;
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  ~SharedMapping();

  [[nodiscard]] void* data() const { return data_; }
  [[nodiscard]] std::byte* bytes() const { return static_cast<std::byte*>(data_); }
  [[nodiscard]] std::size_t size() const { return size_; }

 private:
  SharedMapping(void* data, std::size_t size) : data_(data), size_(size) {}
  void Unmap() noexcept;

  void* data_ = nullptr;  // Null once moved from.
  std::size_t size_ = 0;
};

}  // namespace hurray
