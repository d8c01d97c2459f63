// The daemon's pools (Daemon::CreatePools): the CPU pool, restarted from what an earlier
// daemon left; the sealed pool; a CUDA pool per device, or none and why; the fast path's
// directory; and --discard-state.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon.h"
#include "fast_path/directory_segment.h"
#include "fast_path/lease_page.h"
#include "journal/cpu_pool_restart.h"
#include "pool/cpu_pool.h"
#include "pool/cuda_devices.h"
#include "pool/cuda_pool.h"
#include "pool/pool_set.h"
#include "pool/sealed_pool.h"

#if HURRAY_HAVE_CUDA
#include "hurray/cuda/driver.h"
#include "pool/cuda_slab_memory.h"
#endif

namespace hurray::daemon {
namespace {

// What the CPU pool reserves before the daemon serves (about 0.15 s on tmpfs), so that a
// client's first tensors fit at once; the rest is reserved in the background
// (Daemon::StartReserving).
constexpr std::uint64_t kReservedBeforeServing = std::uint64_t{128} << 20;

static_assert(kMaxDirectoryEntries == fast_path::DirectorySegment::kMaxEntries);
static_assert(kMaxLeaseSlots == fast_path::LeasePage::kMaxSlots);

// The CPU pool the configuration describes, with the huge pages the host can give it, made of
// the segments an earlier daemon of `state` left when tensors live in them (RestartCpuPool);
// only the first kReservedBeforeServing bytes of a new pool's memory are reserved yet (the
// rest: Daemon::StartReserving).
Result<RestartedCpuPool> CreateCpuPool(const Config::CpuPool& config, const StateDirectory& state,
                                       JournalSync sync) {
  // Explicit or transparent that the host cannot honour stops the start; only auto falls
  // back, and says why.
  auto huge_pages =
      ChooseHugePages(config.huge_pages, config.capacity_bytes, ReadHostHugePageFacts());
  if (!huge_pages) return std::unexpected(huge_pages.error().WithContext("cpu_pool"));
  spdlog::info("cpu pool: huge pages: {}", huge_pages->explanation);
  auto restarted =
      RestartCpuPool(state, sync,
                     CpuPool::Options{.name = std::string(kDefaultPoolName),
                                      .capacity_bytes = config.capacity_bytes,
                                      .segment_bytes = config.segment_bytes,
                                      .page_size = config.page_size,
                                      .shm_prefix = config.shm_prefix,
                                      .first_segment_id = 1,
                                      .huge_pages = huge_pages->backing,
                                      .reserve_at_create_bytes = kReservedBeforeServing});
  if (!restarted) return std::unexpected(restarted.error().WithContext("cpu_pool"));
  const std::unique_ptr<CpuPool>& pool = restarted->pool;
  for (std::uint32_t i = 0; i < pool->segment_count(); ++i) {
    const std::uint64_t segment = pool->first_segment_id() + i;
    spdlog::info("cpu pool: segment {} is {} ({} MiB{})", segment,
                 pool->SegmentPath(segment).value_or("?"),
                 pool->SegmentSize(segment).value_or(0) >> 20,
                 restarted->adopted ? ", adopted from the daemon before" : "");
  }
  return std::move(*restarted);
}

// Where --discard-state may remove the CPU pool's segments: /dev/shm, and the hugetlbfs mount
// that the pool's huge pages would use now, under its prefix.
SegmentPlace DiscardablePlace(const Config::CpuPool& config) {
  SegmentPlace place{.shm_prefix = config.shm_prefix};
  auto huge_pages =
      ChooseHugePages(config.huge_pages, config.capacity_bytes, ReadHostHugePageFacts());
  if (huge_pages && huge_pages->backing.mode == HugePages::kExplicit) {
    place.hugetlbfs_directory = huge_pages->backing.hugetlbfs_directory;
  }
  return place;
}

// No CUDA pools, and the one log line and the allocation errors that say why.
void NoCudaPools(PoolSet& pools, std::string reason) {
  spdlog::info("no CUDA pools: {}", reason);
  pools.SetCudaUnavailableReason(std::move(reason));
}

#if HURRAY_HAVE_CUDA
// The CUDA pool of `plan`; a legacy pool says loudly what it gives up.
Result<std::unique_ptr<CudaPool>> CreateCudaPool(const cuda::DriverApi& driver,
                                                 const CudaPoolPlan& plan,
                                                 const Config::CudaPool& config) {
  HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<CudaSlabMemory> memory,
                          CudaSlabMemory::Create(driver, plan));
  HURRAY_ASSIGN_OR_RETURN(
      std::unique_ptr<CudaPool> pool,
      CudaPool::Create(CudaPool::Options{.name = plan.name,
                                         .capacity_bytes = plan.capacity_bytes,
                                         .slab_bytes = plan.slab_bytes,
                                         .first_segment_id = plan.first_segment_id,
                                         .idle_slab_release =
                                             std::chrono::milliseconds(config.idle_slab_release_ms),
                                         .device_uuid = plan.device.uuid,
                                         .device_name = plan.device.name,
                                         .device_ordinal = plan.device.ordinal},
                       std::move(memory)));
  if (plan.mechanism == SlabMechanism::kVmm) {
    spdlog::info("cuda {}", DescribeCudaPoolPlan(plan));
  } else {
    spdlog::warn(
        "cuda {}; LEGACY cudaIpc handles: any process that learns a slab's 64 handle "
        "bytes can open it (they travel only on the session socket)",
        DescribeCudaPoolPlan(plan));
  }
  return pool;
}
#endif

// A CUDA pool per device the driver shows, added to `pools` and returned (for the idle-slab
// timer). No driver, no device or cuda_pool.enabled false: none, and one line saying why.
// A device that the driver shows but the daemon cannot use stops the start.
Result<std::vector<CudaPool*>> AddCudaPools(const Config::CudaPool& config, PoolSet& pools) {
  if (!config.enabled) {
    NoCudaPools(pools, "cuda_pool.enabled is false");
    return std::vector<CudaPool*>();
  }
#if HURRAY_HAVE_CUDA
  Result<const cuda::DriverApi*> driver = cuda::LoadDriver();
  if (!driver) {
    NoCudaPools(pools, driver.error().message());
    return std::vector<CudaPool*>();
  }
  HURRAY_ASSIGN_OR_RETURN(const std::vector<CudaDeviceFacts> devices, ReadCudaDevices(**driver));
  if (devices.empty()) {
    NoCudaPools(pools, "the NVIDIA driver shows no CUDA device (cuDeviceGetCount 0)");
    return std::vector<CudaPool*>();
  }
  HURRAY_ASSIGN_OR_RETURN(const std::vector<CudaPoolPlan> plans,
                          ChooseCudaPools(devices, {.capacity_bytes = config.capacity_bytes,
                                                    .slab_bytes = config.slab_bytes}));
  std::vector<CudaPool*> cuda_pools;
  for (const CudaPoolPlan& plan : plans) {
    HURRAY_ASSIGN_OR_RETURN(std::unique_ptr<CudaPool> pool, CreateCudaPool(**driver, plan, config));
    cuda_pools.push_back(pool.get());
    pools.Add(std::move(pool));
  }
  return cuda_pools;
#else
  NoCudaPools(pools, "this hurrayd was built without CUDA support (no CUDA toolkit at build time)");
  return std::vector<CudaPool*>();
#endif
}
}  // namespace

Result<std::string> Daemon::DiscardState(const Config& config) {
  HURRAY_ASSIGN_OR_RETURN(const StateDirectory state, StateDirectory::Open(config.state_directory));
  HURRAY_ASSIGN_OR_RETURN(const std::size_t removed,
                          hurray::daemon::DiscardState(state, DiscardablePlace(config.cpu_pool)));
  return fmt::format("removed {} and the {} segments it kept\n", state.JournalPath(), removed);
}

// The daemon's pools: the CPU pool, and the CUDA pools. A pool that fails leaves none
// behind: the pools already made are destroyed with the set.
Status Daemon::CreatePools() {
  auto pools = std::make_unique<PoolSet>();
  HURRAY_ASSIGN_OR_RETURN(state_directory_, StateDirectory::Open(config_.state_directory));
  HURRAY_RETURN_IF_ERROR(CreateFastPathDirectory(*state_directory_));
  HURRAY_ASSIGN_OR_RETURN(epoch_holds_, EpochHolds::Open(state_directory_->directory(), epoch_));
  HURRAY_ASSIGN_OR_RETURN(RestartedCpuPool cpu_pool,
                          CreateCpuPool(config_.cpu_pool, *state_directory_, config_.journal_sync));
  cpu_pool_ = cpu_pool.pool.get();
  journal_ = std::move(cpu_pool.journal);
  if (journal_) registry_journal_ = std::make_unique<VersionJournalOf<TensorJournal>>(*journal_);
  journaled_versions_ = std::move(cpu_pool.versions);
  retained_versions_ = std::move(cpu_pool.retained);
  // Only memory of adopted segments can be under an earlier client's view; new segments are
  // new memory.
  holding_for_earlier_clients_ = cpu_pool.adopted && epoch_holds_->earlier_held();
  pools->Add(std::move(cpu_pool.pool));
  if (config_.sealed_pool.capacity_bytes != 0) {
    auto sealed_pool = SealedPool::Create({.capacity_bytes = config_.sealed_pool.capacity_bytes,
                                           .max_segments = config_.sealed_pool.max_buffers});
    if (!sealed_pool) return std::unexpected(sealed_pool.error().WithContext("sealed_pool"));
    pools->Add(std::move(*sealed_pool));
  }
  auto cuda_pools = AddCudaPools(config_.cuda_pool, *pools);
  if (!cuda_pools) return std::unexpected(cuda_pools.error().WithContext("cuda_pool"));
  pools_ = std::move(pools);
  cuda_pools_ = std::move(*cuda_pools);
  return {};
}

Status Daemon::CreateFastPathDirectory(const StateDirectory& state) {
  constexpr std::string_view kRecord = "fast_path_directory";
  const std::string shm_prefix =
      fast_path::DirectorySegment::ShmPrefixFor(config_.cpu_pool.shm_prefix);
  auto ended = fast_path::DirectorySegment::EndAbandoned(state.directory(), kRecord,
                                                         {.shm_prefix = shm_prefix});
  if (!ended) return std::unexpected(ended.error().WithContext("fast_path"));
  if (*ended) spdlog::info("fast path: the directory of the daemon before marked ended");
  if (!config_.fast_path.enabled) {
    spdlog::info("fast path: off ([fast_path] enabled = false)");
    return {};
  }
  auto directory =
      fast_path::DirectorySegment::Create(shm_prefix, config_.fast_path.directory_entries, epoch_);
  if (!directory) return std::unexpected(directory.error().WithContext("fast_path"));
  if (Status recorded = (*directory)->Record(state.directory(), kRecord); !recorded) {
    return std::unexpected(recorded.error().WithContext("fast_path"));
  }
  spdlog::info("fast path: directory {} ({} entries), {} lease slots per session",
               (*directory)->path(), (*directory)->entry_count(), config_.fast_path.lease_slots);
  fast_path_directory_ = std::move(*directory);
  fast_path_record_ = state.directory().PathOf(kRecord);
  return {};
}

}  // namespace hurray::daemon
