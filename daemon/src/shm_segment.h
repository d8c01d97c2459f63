// ShmSegment: one named POSIX shared-memory segment owned by the daemon.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "hurray/error.h"
#include "hurray/unique_fd.h"

namespace hurray::daemon {

// A POSIX shared-memory object created through Boost.Interprocess, named
// "/<prefix>-<32 hex digits>" from 128 random bits so that no client can guess it, with mode
// 0600 so that only the daemon's user can open it by name. Clients get in only through a
// descriptor the daemon chose to send (Open).
//
// Its whole size is reserved at creation (posix_fallocate), so a full /dev/shm is an error of
// Create rather than a SIGBUS in a client that touches a page later. The daemon never maps
// the segment and keeps no descriptor of it open: the name is the handle.
//
// Owns the name: the destructor removes it from the namespace (descriptors and mappings that
// clients hold stay valid until they close them). Move-only. Not thread-safe to move or
// destroy; the const methods may be called from any thread.
class ShmSegment {
 public:
  // Creates a segment of `size` bytes (> 0). `prefix` is 1 to 200 characters of [A-Za-z0-9._-].
  // INVALID_ARGUMENT for a bad prefix or size 0; RESOURCE_EXHAUSTED naming the size and the
  // errno text when /dev/shm cannot hold `size` bytes; other failures name the failed call.
  // Nothing is left behind in /dev/shm on failure.
  [[nodiscard]] static Result<ShmSegment> Create(std::string_view prefix, std::uint64_t size);

  // OK when `prefix` may start a segment name: 1 to 200 characters of [A-Za-z0-9._-];
  // otherwise INVALID_ARGUMENT naming shm_prefix and its value.
  [[nodiscard]] static Status ValidatePrefix(std::string_view prefix);

  ShmSegment(ShmSegment&& other) noexcept;
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;
  ~ShmSegment();

  // A new descriptor on the whole segment (close-on-exec), opened O_RDONLY (the kernel then
  // refuses PROT_WRITE shared mappings and writes) or O_RDWR. The caller owns it.
  [[nodiscard]] Result<UniqueFd> Open(bool writable) const;

  // The POSIX name, with its leading slash ("/hurray-0123…"); the file is /dev/shm/<name>.
  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] std::uint64_t size() const { return size_; }

 private:
  ShmSegment(std::string name, std::uint64_t size) : name_(std::move(name)), size_(size) {}

  // Removes the name, if this object still owns one.
  void Remove() noexcept;

  std::string name_;  // Empty once moved from.
  std::uint64_t size_ = 0;
};

}  // namespace hurray::daemon
