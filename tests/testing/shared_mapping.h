// SharedMapping: a test's MAP_SHARED mapping of a whole segment descriptor, with 64-bit word
// access for fences (what a producer's cuStreamWriteValue64 and a consumer's wait do).
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <utility>

namespace hurray::testing {

// Unmapped on destruction. Move-only; not thread-safe to move, its words may be read and
// written from any thread.
class SharedMapping {
 public:
  // Maps `size` bytes of `fd` read-write or read-only; a failed mmap fails the test and
  // gives a mapping that is not valid().
  static SharedMapping Of(int fd, std::uint64_t size, bool writable) {
    void* base =
        ::mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    EXPECT_NE(base, MAP_FAILED) << "mmap: errno " << errno;
    return {base == MAP_FAILED ? nullptr : base, size};
  }

  SharedMapping(SharedMapping&& other) noexcept
      : base_(std::exchange(other.base_, nullptr)), size_(other.size_) {}
  SharedMapping(const SharedMapping&) = delete;
  SharedMapping& operator=(const SharedMapping&) = delete;
  SharedMapping& operator=(SharedMapping&&) = delete;
  ~SharedMapping() {
    if (base_ != nullptr) ::munmap(base_, size_);
  }

  [[nodiscard]] bool valid() const { return base_ != nullptr; }

  // The word at byte `offset` (a multiple of 8, below the size): an acquire load.
  [[nodiscard]] std::uint64_t ReadWord(std::uint64_t offset) const {
    return std::atomic_ref<std::uint64_t>(*Word(offset)).load(std::memory_order_acquire);
  }
  // A release store; the mapping must be writable.
  void WriteWord(std::uint64_t offset, std::uint64_t value) const {
    std::atomic_ref<std::uint64_t>(*Word(offset)).store(value, std::memory_order_release);
  }

 private:
  SharedMapping(void* base, std::uint64_t size) : base_(base), size_(size) {}
  [[nodiscard]] std::uint64_t* Word(std::uint64_t offset) const {
    return static_cast<std::uint64_t*>(base_) + offset / sizeof(std::uint64_t);
  }

  void* base_;
  std::uint64_t size_;
};

}  // namespace hurray::testing
