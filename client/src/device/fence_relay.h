// FenceRelay: the words a consumer's streams wait on, in this process's own memory, each
// set once the daemon's fence word it stands for is reached or poisoned.
//
// A consumer's stream does not wait on the daemon's fence word itself, for two reasons
// (docs/gpu.md, "Waiting for a fence"):
//   - the word is in the daemon's fence segment, which a consumer may only map read-only,
//     and a read-only mapping can be registered with the driver only where the device says
//     READ_ONLY_HOST_REGISTER_SUPPORTED (often 0 on x86 hosts);
//   - if the daemon is killed and then the producer dies, nothing would ever write that word
//     again, and the stream would wait for ever.
// So each fence a stream waits on gets a relay word in a page of this process (registered
// read-write, which every host that registers memory allows). What sets it:
//   - where the daemon's word could be registered (`device_word` != 0), a stream of the
//     relay's own waits on it and then writes the relay word: the handoff stays on the GPU;
//   - otherwise a thread of the relay reads the daemon's word, from 20 us to 1 ms apart
//     while anything waits, and writes the relay word once it is reached;
//   - once the daemon that granted the fence has exited (its pidfd polls readable), the
//     thread watches the word itself, and after `orphaned_wait` writes the relay word
//     anyway, marking the fence abandoned: the producer is presumed gone, and a waiting
//     stream moves on as it does past a poisoned fence.
// Relay words are never unmapped or unregistered (a stream may still read one): each is
// reused, with a larger value, once the previous wait on it ended. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "device/device_memory_mapper.h"
#include "hurray/error.h"
#include "hurray/ipc/unique_fd.h"

namespace hurray::client_internal {

// A daemon fence to relay.
struct FenceToRelay {
  // The daemon's word, in a host mapping of its fence segment that `keep` holds.
  const std::uint64_t* word = nullptr;
  std::shared_ptr<const void> keep;
  std::uint64_t value = 0;
  int device_ordinal = 0;
  // The daemon's word registered for the device (the GPU relays it), or 0 (the host does).
  DeviceAddress device_word = 0;
  // The granting daemon's pidfd (SessionConnection::daemon_pidfd), or null: then the fence
  // is never presumed orphaned.
  std::shared_ptr<const UniqueFd> daemon_pidfd;
  std::chrono::milliseconds orphaned_wait{10'000};
};

// A relayed fence: streams wait until the word at device_word() reaches value().
class RelayedFence {
 public:
  [[nodiscard]] DeviceAddress device_word() const { return relay_address_; }
  [[nodiscard]] std::uint64_t value() const { return value_; }
  // Whether the relay gave up on the fence (its daemon had exited and orphaned_wait passed
  // with the word unreached): streams that waited have moved on without the data.
  [[nodiscard]] bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }
  // The daemon's word now, read in this process's mapping of it (which the relay keeps).
  [[nodiscard]] std::uint64_t daemon_word() const {
    return __atomic_load_n(fence_.word, __ATOMIC_ACQUIRE);
  }

 private:
  friend class FenceRelay;
  RelayedFence(FenceToRelay fence, std::size_t slot, std::uint64_t* relay_word,
               DeviceAddress device_word, std::uint64_t value)
      : fence_(std::move(fence)),
        slot_(slot),
        relay_word_(relay_word),
        relay_address_(device_word),
        value_(value) {}

  const FenceToRelay fence_;
  const std::size_t slot_;
  std::uint64_t* const relay_word_;
  const DeviceAddress relay_address_;
  const std::uint64_t value_;
  std::atomic<bool> abandoned_{false};
  // Guarded by FenceRelay::mutex_.
  std::optional<std::chrono::steady_clock::time_point> orphaned_until_;
};

class FenceRelay {
 public:
  // Relays through `mapper` (which must outlive this).
  explicit FenceRelay(DeviceMemoryMapper& mapper);
  // Stops the thread. The relay pages stay registered and mapped: a stream may still read
  // them.
  ~FenceRelay();
  FenceRelay(const FenceRelay&) = delete;
  FenceRelay& operator=(const FenceRelay&) = delete;

  // This process's relay, over a mapper of its own made on first use (it holds the
  // devices' primary contexts for the process's life). Never destroyed. CreateCuda-
  // DeviceMemoryMapper's errors (no driver), remembered for the next call to try again.
  [[nodiscard]] static Result<FenceRelay*> ForProcess();
  // This process's relay if ForProcess made it, else null (then no GPU relay reads anything).
  [[nodiscard]] static FenceRelay* IfCreated();

  [[nodiscard]] DeviceMemoryMapper& mapper() { return mapper_; }

  // The relay of `fence`: the same for every call while it is pending. Null when the
  // daemon's word is reached already (or poisoned): nothing needs to wait. The driver's
  // errors of registering a relay page or enqueuing the GPU relay.
  [[nodiscard]] Result<std::shared_ptr<const RelayedFence>> Relay(FenceToRelay fence);

  // Whether a stream of the relay may still read a word of the mapping `keep` holds (a
  // GPU relay that has not written its relay word): that mapping's registration must stay.
  [[nodiscard]] bool GpuMayRead(const void* keep) const;

  // Keeps `mapping` (a daemon's fence segment GpuMayRead named) mapped for the process's
  // life.
  void KeepForever(std::shared_ptr<const void> mapping);

  // Fences relayed and not yet released; for tests.
  [[nodiscard]] std::size_t pending_count() const;

 private:
  struct Page {
    std::uint64_t* host = nullptr;
    DeviceAddress device = 0;
  };
  struct Slot {
    std::uint64_t* host = nullptr;
    DeviceAddress device = 0;
    std::uint64_t generation = 0;  // The last value a relay of it used.
  };
  // A free slot of `device_ordinal` (a new page registered when none is left).
  Result<std::size_t> TakeSlotLocked(int device_ordinal);
  void Watch();
  // Settles what can be settled; returns how long to sleep (nullopt: until woken).
  std::optional<std::chrono::microseconds> SweepLocked(std::chrono::steady_clock::time_point now);
  void ReleaseLocked(std::map<std::pair<const std::uint64_t*, std::uint64_t>,
                              std::shared_ptr<RelayedFence>>::iterator pending,
                     bool abandoned);
  void Wake() const;

  DeviceMemoryMapper& mapper_;
  UniqueFd wake_;  // An eventfd the thread polls.
  mutable std::mutex mutex_;
  bool stopping_ = false;  // Guarded by mutex_.
  // Guarded by mutex_.
  std::vector<Slot> slots_;
  std::map<int, std::vector<std::size_t>> free_slots_;  // Per device ordinal.
  // (daemon word, value) -> its relay, while pending.
  std::map<std::pair<const std::uint64_t*, std::uint64_t>, std::shared_ptr<RelayedFence>> pending_;
  // The daemons' mappings of words a GPU relay may still read after the host released its
  // fence (an orphaned one): kept mapped for the process's life. Guarded by mutex_.
  std::vector<std::shared_ptr<const void>> kept_;
  std::chrono::microseconds poll_interval_{20};  // Guarded by mutex_.
  std::thread thread_;
};

}  // namespace hurray::client_internal
