// RegistryFuzzHarness: a fresh Registry over a fresh small CPU pool for one fuzz input, and
// the invariants every input must leave true once its sessions have ended.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <string>

#include "pool/pool.h"
#include "pool/pool_set.h"
#include "registry/registry.h"

namespace hurray::daemon {

// Prints which invariant broke and aborts, which libFuzzer reports as a crash.
[[noreturn]] void BrokenInvariant(const char* fuzzer, const char* invariant,
                                  const std::string& detail);

// Ids are deterministic per input: the registry is new, so its sessions, allocations and
// leases are numbered 1, 2, ... in the order the input makes them (seeds rely on it). The
// pool holds kPoolBytes, small enough that inputs fill it (and evict from it).
//
// Not thread-safe; the registry it owns is. `io` runs the registry's wait timers and must
// outlive the harness.
class RegistryFuzzHarness {
 public:
  static constexpr std::uint64_t kPoolBytes = 1 << 20;

  // Aborts when the pool cannot be made (a broken host, not a finding).
  RegistryFuzzHarness(const char* fuzzer, boost::asio::io_context& io);

  [[nodiscard]] Registry& registry() { return *registry_; }

  // Once every session has ended: deletes every name still published, then aborts unless
  // the registry holds no session, allocation, lease or version, every byte published was
  // reclaimed, and the pool has no byte in use.
  void CheckDrained();

 private:
  const char* fuzzer_;
  PoolSet pools_;
  Pool* pool_ = nullptr;
  std::unique_ptr<Registry> registry_;
};

}  // namespace hurray::daemon
