// UidQuotaTable: what each uid holds in the daemon (bytes pending, bytes published, leases,
// sessions), checked against per-uid quotas.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <unordered_map>

#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::daemon {

// The most one uid may hold at once, summed over all its sessions (the `[uid_quota]` table
// of the config); 0 in a field: no limit. A plain value.
struct UidQuota {
  // Bytes of unpublished allocations.
  std::uint64_t pending_bytes = 0;
  // Bytes of published versions it published that still hold memory (superseded or deleted
  // ones count until their last lease ends and their memory returns).
  std::uint64_t published_bytes = 0;
  // Leases held.
  std::uint64_t leases = 0;
};

// Usage per uid, kept in step by the registry as allocations, publishes, leases and
// sessions come and go; Check* answer RESOURCE_EXHAUSTED naming the quota, the uid and
// the figures: `uid 1001: published_bytes quota 1 GiB exceeded (1073741000 bytes
// published, 4096 more asked)`. A uid leaves the table once it holds nothing.
//
// Not thread-safe: guarded by Registry::mutex_.
class UidQuotaTable {
 public:
  explicit UidQuotaTable(UidQuota quota) : quota_(quota) {}

  [[nodiscard]] const UidQuota& quota() const { return quota_; }

  // Whether `uid` may take `bytes` more of pending allocation, publish `bytes` more, take
  // one more lease.
  [[nodiscard]] Status CheckPending(uid_t uid, std::uint64_t bytes) const;
  [[nodiscard]] Status CheckPublished(uid_t uid, std::uint64_t bytes) const;
  [[nodiscard]] Status CheckLease(uid_t uid) const { return CheckLeases(uid, 1); }
  // Whether `uid` may take `count` more leases (a lease page's slots count as leases).
  [[nodiscard]] Status CheckLeases(uid_t uid, std::uint64_t count) const;

  // Counts what `uid` took or gave back. A removal never exceeds what was added.
  void AddPending(uid_t uid, std::uint64_t bytes);
  void RemovePending(uid_t uid, std::uint64_t bytes);
  void AddPublished(uid_t uid, std::uint64_t bytes);
  void RemovePublished(uid_t uid, std::uint64_t bytes);
  void AddLease(uid_t uid) { AddLeases(uid, 1); }
  void RemoveLease(uid_t uid) { RemoveLeases(uid, 1); }
  void AddLeases(uid_t uid, std::uint64_t count);
  void RemoveLeases(uid_t uid, std::uint64_t count);
  void AddSession(uid_t uid);
  void RemoveSession(uid_t uid);

  // One UidUsage per uid that holds something, by uid.
  void FillStats(v1::StatsResponse& response) const;

 private:
  struct Usage {
    std::uint64_t pending_bytes = 0;
    std::uint64_t published_bytes = 0;
    std::uint64_t leases = 0;
    std::uint32_t sessions = 0;
  };

  [[nodiscard]] const Usage* Find(uid_t uid) const;
  // Erases `uid`'s entry once it holds nothing.
  void EraseIfIdle(uid_t uid);

  const UidQuota quota_;
  std::unordered_map<uid_t, Usage> usage_;
};

}  // namespace hurray::daemon
