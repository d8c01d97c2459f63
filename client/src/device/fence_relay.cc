#include "device/fence_relay.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/fence_word.h"

namespace hurray::client_internal {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::microseconds;

// Bytes of one page of relay words: 8,192 words, registered once per device.
constexpr std::size_t kRelayPageBytes = std::size_t{64} << 10;
// How often the thread reads the daemon's words it watches: first 20 us apart, doubling
// while none is reached, up to 1 ms.
constexpr microseconds kFirstPollInterval{20};
constexpr microseconds kLongestPollInterval{1000};
// How often pending GPU relays are looked at, to reuse the words they wrote.
constexpr microseconds kGpuRelaySweepInterval{50'000};

std::uint64_t Load(const std::uint64_t* word) { return __atomic_load_n(word, __ATOMIC_ACQUIRE); }

}  // namespace

FenceRelay::FenceRelay(DeviceMemoryMapper& mapper)
    : mapper_(mapper), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

FenceRelay::~FenceRelay() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
}

namespace {

// This process's relay (FenceRelay::ForProcess), guarded by ProcessRelayMutex.
std::mutex& ProcessRelayMutex() {
  static std::mutex mutex;
  return mutex;
}
FenceRelay*& ProcessRelay() {
  static FenceRelay* relay = nullptr;
  return relay;
}

}  // namespace

Result<FenceRelay*> FenceRelay::ForProcess() {
  std::lock_guard lock(ProcessRelayMutex());
  FenceRelay*& relay = ProcessRelay();
  if (relay == nullptr) {
    HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<DeviceMemoryMapper> mapper,
                            CreateCudaDeviceMemoryMapper());
    // Both live as long as the process: a stream may read a relay word at any time.
    relay = new FenceRelay(*mapper.release());  // NOLINT(cppcoreguidelines-owning-memory)
  }
  return relay;
}

FenceRelay* FenceRelay::IfCreated() {
  std::lock_guard lock(ProcessRelayMutex());
  return ProcessRelay();
}

Result<std::shared_ptr<const RelayedFence>> FenceRelay::Relay(FenceToRelay fence) {
  if (FenceWordReaches(Load(fence.word), fence.value)) return nullptr;
  if (!wake_) return ErrnoFailure("eventfd", "the fence relay", errno);
  std::lock_guard lock(mutex_);
  const auto key = std::make_pair(fence.word, fence.value);
  if (auto found = pending_.find(key); found != pending_.end()) return found->second;
  HURRAY_ASSIGN_OR_RETURN(const std::size_t slot_index, TakeSlotLocked(fence.device_ordinal));
  Slot& slot = slots_[slot_index];
  const std::uint64_t value = slot.generation + 1;
  if (fence.device_word != 0) {
    if (Status relayed = mapper_.RelayValue(fence.device_ordinal, fence.device_word, fence.value,
                                            slot.device, value);
        !relayed) {
      free_slots_[fence.device_ordinal].push_back(slot_index);
      return std::unexpected(relayed.error());
    }
  }
  slot.generation = value;
  auto relayed = std::shared_ptr<RelayedFence>(
      new RelayedFence(std::move(fence), slot_index, slot.host, slot.device, value));
  pending_.emplace(key, relayed);
  poll_interval_ = kFirstPollInterval;
  if (!thread_.joinable()) thread_ = std::thread([this] { Watch(); });
  Wake();
  return relayed;
}

bool FenceRelay::GpuMayRead(const void* keep) const {
  std::lock_guard lock(mutex_);
  const auto reads = [keep](const std::shared_ptr<const void>& kept) { return kept.get() == keep; };
  if (std::ranges::any_of(kept_, reads)) return true;
  return std::ranges::any_of(pending_, [keep](const auto& entry) {
    return entry.second->fence_.device_word != 0 && entry.second->fence_.keep.get() == keep;
  });
}

void FenceRelay::KeepForever(std::shared_ptr<const void> mapping) {
  std::lock_guard lock(mutex_);
  kept_.push_back(std::move(mapping));
}

std::size_t FenceRelay::pending_count() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

Result<std::size_t> FenceRelay::TakeSlotLocked(int device_ordinal) {
  std::vector<std::size_t>& free = free_slots_[device_ordinal];
  if (free.empty()) {
    void* page =
        ::mmap(nullptr, kRelayPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
      return ErrnoFailure("mmap", "a page of fence relay words", errno);
    }
    // A forked child neither inherits nor copies it: the device keeps reading this page.
    (void)::madvise(page, kRelayPageBytes, MADV_DONTFORK);
    auto device = mapper_.RegisterHostMemory(page, kRelayPageBytes, device_ordinal,
                                             /*read_only=*/false);
    if (!device) {
      ::munmap(page, kRelayPageBytes);
      return std::unexpected(device.error().WithContext("a page of fence relay words"));
    }
    auto* words = static_cast<std::uint64_t*>(page);
    constexpr std::size_t kWords = kRelayPageBytes / sizeof(std::uint64_t);
    for (std::size_t i = 0; i < kWords; ++i) {
      free.push_back(slots_.size());
      slots_.push_back(
          Slot{.host = words + i, .device = *device + i * sizeof(std::uint64_t), .generation = 0});
    }
    std::ranges::reverse(free);  // The page's first word first.
  }
  const std::size_t slot = free.back();
  free.pop_back();
  return slot;
}

void FenceRelay::ReleaseLocked(std::map<std::pair<const std::uint64_t*, std::uint64_t>,
                                        std::shared_ptr<RelayedFence>>::iterator pending,
                               bool abandoned) {
  RelayedFence& relayed = *pending->second;
  relayed.abandoned_.store(abandoned, std::memory_order_release);
  __atomic_store_n(relayed.relay_word_, relayed.value_, __ATOMIC_RELEASE);
  if (relayed.fence_.device_word == 0) {
    free_slots_[relayed.fence_.device_ordinal].push_back(relayed.slot_);
  } else {
    // Its GPU relay may still wait on the daemon's word and write this word later: neither
    // the word nor the daemon's mapping is ever reused.
    kept_.push_back(relayed.fence_.keep);
  }
  pending_.erase(pending);
}

std::optional<microseconds> FenceRelay::SweepLocked(Clock::time_point now) {
  bool host_watches = false;
  bool gpu_relays = false;
  std::optional<Clock::time_point> deadline;
  for (auto it = pending_.begin(); it != pending_.end();) {
    RelayedFence& relayed = *it->second;
    if (FenceWordReaches(Load(relayed.relay_word_), relayed.value_)) {
      // Its GPU relay wrote it (the host writes only as it erases): the word may be reused.
      free_slots_[relayed.fence_.device_ordinal].push_back(relayed.slot_);
      it = pending_.erase(it);
      continue;
    }
    const bool by_host = relayed.fence_.device_word == 0 || relayed.orphaned_until_.has_value();
    auto current = it++;
    if (by_host && FenceWordReaches(Load(relayed.fence_.word), relayed.fence_.value)) {
      ReleaseLocked(current, /*abandoned=*/false);
      continue;
    }
    if (relayed.orphaned_until_ && now >= *relayed.orphaned_until_) {
      ReleaseLocked(current, /*abandoned=*/true);
      continue;
    }
    host_watches = host_watches || by_host;
    gpu_relays = gpu_relays || !by_host;
    if (relayed.orphaned_until_) {
      deadline = std::min(deadline.value_or(*relayed.orphaned_until_), *relayed.orphaned_until_);
    }
  }
  std::optional<microseconds> sleep;
  if (host_watches) {
    sleep = poll_interval_;
    poll_interval_ = std::min(poll_interval_ * 2, kLongestPollInterval);
  } else if (gpu_relays) {
    sleep = kGpuRelaySweepInterval;
  }
  if (deadline) {
    const auto until = std::chrono::duration_cast<microseconds>(*deadline - now);
    sleep = std::min(sleep.value_or(until), until);
  }
  return sleep;
}

void FenceRelay::Watch() {
  std::vector<std::shared_ptr<const UniqueFd>> daemons;
  std::vector<pollfd> polled;
  for (;;) {
    std::optional<microseconds> sleep;
    daemons.clear();
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      sleep = SweepLocked(Clock::now());
      for (const auto& [key, relayed] : pending_) {
        const std::shared_ptr<const UniqueFd>& daemon = relayed->fence_.daemon_pidfd;
        if (daemon != nullptr && !relayed->orphaned_until_ &&
            std::ranges::find(daemons, daemon) == daemons.end()) {
          daemons.push_back(daemon);
        }
      }
    }
    polled.assign(1, pollfd{.fd = wake_.get(), .events = POLLIN, .revents = 0});
    for (const auto& daemon : daemons) {
      polled.push_back(pollfd{.fd = daemon->get(), .events = POLLIN, .revents = 0});
    }
    timespec timeout{};
    if (sleep) {
      const auto nanoseconds = std::max<std::int64_t>(0, sleep->count()) * 1000;
      timeout.tv_sec = static_cast<std::time_t>(nanoseconds / 1'000'000'000);
      timeout.tv_nsec =
          static_cast<long>(nanoseconds % 1'000'000'000);  // NOLINT(google-runtime-int)
    }
    if (::ppoll(polled.data(), polled.size(), sleep ? &timeout : nullptr, nullptr) <= 0) continue;
    if ((polled[0].revents & POLLIN) != 0) {
      std::uint64_t count = 0;
      (void)!::read(wake_.get(), &count, sizeof(count));
    }
    std::lock_guard lock(mutex_);
    const Clock::time_point now = Clock::now();
    for (std::size_t i = 1; i < polled.size(); ++i) {
      if (polled[i].revents == 0) continue;
      // That daemon has exited: its fences are the relay's to watch, for orphaned_wait.
      for (auto& [key, relayed] : pending_) {
        if (relayed->fence_.daemon_pidfd == daemons[i - 1] && !relayed->orphaned_until_) {
          relayed->orphaned_until_ = now + relayed->fence_.orphaned_wait;
        }
      }
    }
  }
}

void FenceRelay::Wake() const {
  const std::uint64_t one = 1;
  if (wake_) (void)!::write(wake_.get(), &one, sizeof(one));
}

}  // namespace hurray::client_internal
