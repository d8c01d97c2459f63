#include "registry_fuzz_harness.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "pool/cpu_pool.h"

namespace hurray::daemon {

void BrokenInvariant(const char* fuzzer, const char* invariant, const std::string& detail) {
  std::fprintf(stderr, "%s: broken invariant: %s\n%s\n", fuzzer, invariant, detail.c_str());
  std::abort();
}

RegistryFuzzHarness::RegistryFuzzHarness(const char* fuzzer, boost::asio::io_context& io)
    : fuzzer_(fuzzer) {
  auto pool = CpuPool::Create(
      CpuPool::Options{.name = "cpu", .capacity_bytes = kPoolBytes, .shm_prefix = "hurray-fuzz"});
  if (!pool) BrokenInvariant(fuzzer_, "the CPU pool can be made", pool.error().ToString());
  pool_ = pool->get();
  pools_.Add(std::move(*pool));
  registry_ = std::make_unique<Registry>(
      pools_, io, Registry::Options{.max_wait_ms = 20, .max_batch_names = 64});
}

void RegistryFuzzHarness::CheckDrained() {
  std::vector<std::string> names;
  v1::ListRequest list;
  list.set_page_size(1000);
  do {
    auto listed = registry_->List(list, /*viewer=*/nullptr);
    if (!listed) BrokenInvariant(fuzzer_, "List succeeds", listed.error().ToString());
    for (const v1::TensorSummary& tensor : listed->tensors()) names.push_back(tensor.name());
    list.set_page_token(listed->next_page_token());
  } while (!list.page_token().empty());
  // As the daemon's own uid, which the default policy lets delete in every namespace.
  auto cleaner = registry_->OpenSession(
      PeerCredentials{.pid = ::getpid(), .uid = ::geteuid(), .gid = ::getegid()}, "cleaner");
  if (!cleaner) BrokenInvariant(fuzzer_, "a session can be opened", cleaner.error().ToString());
  for (const std::string& name : names) {
    v1::DeleteRequest request;
    request.set_name(name);
    auto deleted = registry_->Delete(cleaner->session_id, request);
    if (!deleted)
      BrokenInvariant(fuzzer_, "a listed name can be deleted", deleted.error().ToString());
  }
  registry_->CloseSession(cleaner->session_id);
  const v1::StatsResponse stats = registry_->Stats();
  // What sessions of this very process (the session server's peer, alive) could still write
  // stays quarantined until it exits: every range still allocated must be one of those.
  const v1::PoolStats& pool = stats.pools(0);
  const bool held = pool.quarantined_ranges() == 0
                        ? pool.used_bytes() != 0
                        : pool.allocation_count() != pool.quarantined_ranges();
  if (stats.session_count() != 0 || stats.pending_allocation_count() != 0 ||
      stats.lease_count() != 0 || stats.version_count() != 0 || stats.tensor_count() != 0 ||
      stats.published_bytes_total() != stats.reclaimed_bytes_total() || held) {
    BrokenInvariant(fuzzer_, "once every session ended and every name is deleted, nothing is held",
                    stats.DebugString());
  }
}

}  // namespace hurray::daemon
