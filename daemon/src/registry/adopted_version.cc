#include "registry/adopted_version.h"

#include <fmt/format.h>

#include "hurray/v1/exchange.pb.h"
#include "registry/allocation_table.h"

namespace hurray::daemon {
namespace {

// Takes every non-empty buffer of `version` from `pool`, all or none.
Status AdoptBuffers(Pool& pool, const TensorVersion& version) {
  for (std::size_t i = 0; i < version.buffers.size(); ++i) {
    const PoolRange& range = version.buffers[i];
    if (range.segment_id == 0) continue;
    if (Status adopted = pool.Adopt(range); !adopted) {
      for (std::size_t j = 0; j < i; ++j) {
        if (version.buffers[j].segment_id != 0) pool.Free(version.buffers[j]);
      }
      return std::unexpected(adopted.error().WithContext(fmt::format("buffer {}", i)));
    }
  }
  return {};
}

}  // namespace

Result<std::shared_ptr<TensorVersion>> AdoptVersion(const JournalRecord& record,
                                                    const PoolSet& pools, AdoptedFor adopted_for) {
  v1::TensorInfo info;
  if (!info.ParseFromString(record.info_without_name) || info.version() != record.number) {
    return DataLossError(
        fmt::format("its stored TensorInfo does not parse as version {}", record.number));
  }
  Pool* pool = pools.Find(info.pool());
  if (pool == nullptr) {
    return FailedPreconditionError(fmt::format("its pool {} is gone", info.pool().substr(0, 64)));
  }
  if (adopted_for == AdoptedFor::kServing && info.handoff().sync_mode() != 0) {
    return FailedPreconditionError(
        fmt::format("its sync handoff (mode {}) died with the daemon", info.handoff().sync_mode()));
  }
  auto version = std::make_shared<TensorVersion>();
  version->info_without_name = record.info_without_name;
  version->number = record.number;
  version->published_at_ns = info.published_at_ns();
  version->element_type = info.tensor_descriptor().element_type();
  version->shape.assign(info.tensor_descriptor().shape().begin(),
                        info.tensor_descriptor().shape().end());
  version->pool = pool;
  version->publisher_uid = record.publisher_uid;
  version->namespace_owner_uid = record.namespace_owner_uid;
  version->evictable = record.evictable;
  version->from_earlier_epoch = true;
  for (const v1::BufferLocation& location : info.buffers()) {
    version->buffers.push_back(PoolRange{.segment_id = location.segment_id(),
                                         .offset = location.offset(),
                                         .size = location.byte_size()});
    version->byte_size += location.byte_size();
  }
  // As Allocate charged it: the buffers and the descriptor the record keeps.
  version->charged_bytes =
      ChargedBytes(version->byte_size, info.tensor_descriptor().ByteSizeLong());
  HURRAY_RETURN_IF_ERROR(AdoptBuffers(*pool, *version));
  return version;
}

}  // namespace hurray::daemon
