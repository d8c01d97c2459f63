#include "registry/allocation_table.h"

#include <fmt/format.h>

#include <utility>

namespace hurray::daemon {

Result<std::vector<v1::BufferLocation>> PlaceBuffers(Pool& pool,
                                                     const TensorDescriptor& descriptor) {
  std::vector<v1::BufferLocation> buffers;
  buffers.reserve(descriptor.buffers().size());
  for (const BufferHandle& buffer : descriptor.buffers()) {
    v1::BufferLocation location;
    location.set_byte_size(buffer.byte_size());
    if (buffer.byte_size() != 0) {
      auto range = pool.Allocate(buffer.byte_size());
      if (!range) {
        FreeBuffers(pool, buffers);
        return std::unexpected(std::move(range).error());
      }
      location.set_segment_id(range->segment_id);
      location.set_segment_size(pool.SegmentSize(range->segment_id).value_or(0));
      location.set_offset(range->offset);
    }
    buffers.push_back(std::move(location));
  }
  return buffers;
}

void FreeBuffers(Pool& pool, const std::vector<v1::BufferLocation>& buffers) {
  for (const auto& buffer : buffers) {
    if (buffer.segment_id() != 0) {
      pool.Free(PoolRange{.segment_id = buffer.segment_id(),
                          .offset = buffer.offset(),
                          .size = buffer.byte_size()});
    }
  }
}

Status SealBuffers(const Allocation& allocation) {
  for (std::size_t i = 0; i < allocation.buffers.size(); ++i) {
    const v1::BufferLocation& buffer = allocation.buffers[i];
    if (buffer.segment_id() == 0) continue;
    if (Status sealed = allocation.pool->Seal(PoolRange{.segment_id = buffer.segment_id(),
                                                        .offset = buffer.offset(),
                                                        .size = buffer.byte_size()});
        !sealed) {
      return std::unexpected(sealed.error().WithContext(fmt::format("buffer {}", i)));
    }
  }
  return {};
}

void AllocationTable::Add(std::uint64_t id, Allocation allocation) {
  allocations_.emplace(id, std::move(allocation));
}

Allocation* AllocationTable::FindOfSession(std::uint64_t id, std::uint64_t session_id) {
  auto found = allocations_.find(id);
  if (found == allocations_.end() || found->second.session_id != session_id) return nullptr;
  return &found->second;
}

std::optional<Allocation> AllocationTable::Take(std::uint64_t id) {
  auto found = allocations_.find(id);
  if (found == allocations_.end()) return std::nullopt;
  std::optional<Allocation> taken(std::move(found->second));
  allocations_.erase(found);
  return taken;
}

}  // namespace hurray::daemon
