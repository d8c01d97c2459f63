#include "registry/fence_table.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cerrno>

#include "hurray/ipc/errno_error.h"
#include "hurray/ipc/shared_mapping.h"
#include "pool/shm_segment.h"

namespace hurray::daemon {

// A fence segment and the daemon's read-write mapping of it, unmapped on destruction.
struct FenceTable::Segment {
  ShmSegment shm;
  SharedMapping mapping;
};

ReservedFence& ReservedFence::operator=(ReservedFence&& other) noexcept {
  if (this != &other) {
    Reset();
    table_ = std::exchange(other.table_, nullptr);
    slot_ = other.slot_;
  }
  return *this;
}

FenceState ReservedFence::State() const {
  return valid() ? FenceTable::State(slot_) : FenceState::kFailed;
}

void ReservedFence::Reset() {
  if (table_ != nullptr) std::exchange(table_, nullptr)->Free(slot_);
}

namespace {

FenceTable::Options Rounded(FenceTable::Options options) {
  const std::uint64_t page = FenceTable::kPageSize;
  options.segment_bytes = std::max(page, (options.segment_bytes + page - 1) / page * page);
  return options;
}

}  // namespace

FenceTable::FenceTable(Options options) : options_(Rounded(std::move(options))) {}

FenceTable::~FenceTable() = default;

Result<ReservedFence> FenceTable::Reserve() {
  std::lock_guard lock(mutex_);
  FenceSlot slot;
  if (!free_.empty()) {
    const FreeWord reused = free_.back();
    free_.pop_back();
    slot = SlotLocked(reused.segment_index, reused.offset, reused.floor + 1);
  } else {
    if (segments_.empty() || fresh_offset_ == options_.segment_bytes) {
      HURRAY_RETURN_IF_ERROR(AddSegmentLocked());
    }
    // A new segment's words are zero (shared memory is zero-filled): value 1 is above it.
    slot = SlotLocked(segments_.size() - 1, fresh_offset_, 1);
    fresh_offset_ += kFenceWordBytes;
  }
  in_use_.emplace(slot.word, slot.value);
  return ReservedFence(this, slot);
}

Status FenceTable::AddSegmentLocked() {
  if (segments_.size() == kMaxSegments) {
    return ResourceExhaustedError(fmt::format("pool {}: all {} fence segment ids are in use",
                                              options_.pool_name, kMaxSegments));
  }
  HURRAY_ASSIGN_OR_RETURN(ShmSegment shm,
                          ShmSegment::Create(options_.shm_prefix, options_.segment_bytes));
  HURRAY_ASSIGN_OR_RETURN(const UniqueFd fd, shm.Open(/*writable=*/true));
  HURRAY_ASSIGN_OR_RETURN(
      SharedMapping mapping,
      SharedMapping::Map(fd.get(), options_.segment_bytes, PROT_READ | PROT_WRITE, shm.name()));
  segments_.push_back(
      std::make_unique<Segment>(Segment{.shm = std::move(shm), .mapping = std::move(mapping)}));
  fresh_offset_ = 0;
  spdlog::debug("pool {}: fence segment {} made ({} fences)", options_.pool_name,
                options_.first_segment_id + segments_.size() - 1,
                options_.segment_bytes / kFenceWordBytes);
  return {};
}

FenceSlot FenceTable::SlotLocked(std::size_t index, std::uint64_t offset,
                                 std::uint64_t value) const {
  return FenceSlot{.segment_id = options_.first_segment_id + index,
                   .segment_size = options_.segment_bytes,
                   .offset = offset,
                   .value = value,
                   .word = static_cast<std::uint64_t*>(segments_[index]->mapping.data()) +
                           offset / kFenceWordBytes};
}

FenceState FenceTable::State(const FenceSlot& slot) {
  const std::uint64_t word =
      std::atomic_ref<std::uint64_t>(*slot.word).load(std::memory_order_acquire);
  if (word == kFencePoison) return FenceState::kFailed;
  return FenceWordReaches(word, slot.value) ? FenceState::kReady : FenceState::kPending;
}

void FenceTable::Poison(const FenceSlot& slot) {
  std::atomic_ref<std::uint64_t>(*slot.word).store(kFencePoison, std::memory_order_release);
}

void FenceTable::Free(const FenceSlot& slot) {
  std::lock_guard lock(mutex_);
  auto found = in_use_.find(slot.word);
  const std::optional<std::size_t> index = IndexOfLocked(slot.segment_id);
  if (found == in_use_.end() || found->second != slot.value || !index) {
    spdlog::error("pool {}: fence at segment {} offset {} value {} is not in use; ignored",
                  options_.pool_name, slot.segment_id, slot.offset, slot.value);
    return;
  }
  in_use_.erase(found);
  const std::uint64_t word =
      std::atomic_ref<std::uint64_t>(*slot.word).load(std::memory_order_acquire);
  // Reached, with room below the limit for a next value: the producer's write has landed.
  if (FenceWordReaches(word, slot.value) && word < kFenceValueLimit - 1) {
    free_.push_back(FreeWord{.segment_index = *index, .offset = slot.offset, .floor = word});
    return;
  }
  Poison(slot);
  ++retired_;
}

std::uint64_t FenceTable::PoisonUnreached() {
  std::lock_guard lock(mutex_);
  std::uint64_t poisoned = 0;
  for (const auto& [word, value] : in_use_) {
    const FenceSlot slot{.value = value, .word = word};
    if (State(slot) == FenceState::kPending) {
      Poison(slot);
      ++poisoned;
    }
  }
  return poisoned;
}

std::optional<std::size_t> FenceTable::IndexOfLocked(std::uint64_t segment_id) const {
  if (segment_id < options_.first_segment_id) return std::nullopt;
  const std::uint64_t index = segment_id - options_.first_segment_id;
  if (index >= segments_.size()) return std::nullopt;
  return static_cast<std::size_t>(index);
}

Result<SegmentAccess> FenceTable::OpenSegment(std::uint64_t segment_id, bool writable) const {
  std::lock_guard lock(mutex_);
  const std::optional<std::size_t> index = IndexOfLocked(segment_id);
  if (!index) {
    return NotFoundError(fmt::format("segment {} is not a fence segment of pool {}", segment_id,
                                     options_.pool_name));
  }
  HURRAY_ASSIGN_OR_RETURN(UniqueFd fd, segments_[*index]->shm.Open(writable));
  return SegmentAccess{.fd = std::move(fd),
                       .segment_size = options_.segment_bytes,
                       .writable = writable,
                       .page_size = kPageSize};
}

std::optional<std::uint64_t> FenceTable::SegmentSize(std::uint64_t segment_id) const {
  std::lock_guard lock(mutex_);
  if (!IndexOfLocked(segment_id)) return std::nullopt;
  return options_.segment_bytes;
}

FenceTable::Counts FenceTable::counts() const {
  std::lock_guard lock(mutex_);
  return Counts{.in_use = in_use_.size(),
                .retired = retired_,
                .free = free_.size(),
                .segments = static_cast<std::uint32_t>(segments_.size())};
}

}  // namespace hurray::daemon
