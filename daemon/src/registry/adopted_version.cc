#include "registry/adopted_version.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "hurray/v1/exchange.pb.h"
#include "registry/allocation_table.h"
#include "registry/registry.h"
#include "registry/registry_errors.h"

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

// ---- Registry: adopting the versions of the journal ----

Registry::Adoption Registry::Adopt(std::vector<JournalRecord> versions,
                                   const std::vector<JournalRecord>& retained,
                                   bool earlier_clients_may_map) {
  Adoption adoption;
  std::lock_guard lock(mutex_);
  versions_.set_earlier_epochs_held(earlier_clients_may_map);
  // First, so that each name's versions stay in number order. Without an earlier client,
  // their memory is simply free.
  for (const JournalRecord& record : retained) {
    if (!earlier_clients_may_map) break;
    Result<std::shared_ptr<TensorVersion>> version =
        AdoptVersion(record, pools_, AdoptedFor::kHolding);
    if (!version) {
      // A CPU range that is not free or a pool that is gone: nothing of it to hold.
      spdlog::warn("{} version {}, retired but still mapped when the daemon before ended: {}",
                   ShownName(record.name), record.number, version.error().message());
      continue;
    }
    // Charged as it was when retired, and uncharged as it is freed (the reclaim observer).
    uid_quotas_.AddPublished((*version)->publisher_uid, (*version)->charged_bytes);
    versions_.AddRetained(record.name, std::move(*version));
    adoption.held.push_back(record);
  }
  for (JournalRecord& record : versions) {
    Result<std::shared_ptr<TensorVersion>> version = AdoptVersion(record, pools_);
    if (!version) {
      const std::string reason =
          fmt::format("version {} did not survive the restart of hurrayd: {}", record.number,
                      version.error().message());
      spdlog::warn("{} is lost: {}", ShownName(record.name), reason);
      lost_.insert_or_assign(record.name, reason);
      ++adoption.lost;
      continue;
    }
    uid_quotas_.AddPublished((*version)->publisher_uid, (*version)->charged_bytes);
    (*version)->fast_path_id = NextFastPathIdLocked(**version);
    versions_.Add(record.name, std::move(*version));
    adoption.adopted.push_back(std::move(record));
  }
  adopted_count_ += adoption.adopted.size();
  lost_count_ += adoption.lost;
  return adoption;
}

std::size_t Registry::ReleaseEarlierEpochs() {
  std::lock_guard lock(mutex_);
  return versions_.ReleaseEarlierEpochs();
}

}  // namespace hurray::daemon
