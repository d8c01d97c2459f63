#include "registry/uid_quota_table.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "pool/huge_pages.h"

namespace hurray::daemon {
namespace {

// RESOURCE_EXHAUSTED when `held` + `more` exceeds `limit` (0: no limit).
Status CheckBytes(uid_t uid, std::string_view quota, std::string_view held_as, std::uint64_t limit,
                  std::uint64_t held, std::uint64_t more) {
  if (limit == 0 || (more <= limit && held <= limit - more)) return {};
  return ResourceExhaustedError(
      fmt::format("uid {}: {} quota {} exceeded ({} bytes {}, {} more "
                  "asked)",
                  uid, quota, FormatPageSize(limit), held, held_as, more));
}

}  // namespace

const UidQuotaTable::Usage* UidQuotaTable::Find(uid_t uid) const {
  auto found = usage_.find(uid);
  return found == usage_.end() ? nullptr : &found->second;
}

Status UidQuotaTable::CheckPending(uid_t uid, std::uint64_t bytes) const {
  const Usage* usage = Find(uid);
  return CheckBytes(uid, "pending_bytes", "pending", quota_.pending_bytes,
                    usage ? usage->pending_bytes : 0, bytes);
}

Status UidQuotaTable::CheckPublished(uid_t uid, std::uint64_t bytes) const {
  const Usage* usage = Find(uid);
  return CheckBytes(uid, "published_bytes", "published", quota_.published_bytes,
                    usage ? usage->published_bytes : 0, bytes);
}

Status UidQuotaTable::CheckLeases(uid_t uid, std::uint64_t count) const {
  const Usage* usage = Find(uid);
  const std::uint64_t held = usage ? usage->leases : 0;
  if (quota_.leases == 0 || (count <= quota_.leases && held <= quota_.leases - count)) return {};
  const std::string asked = count == 1 ? "" : fmt::format(", {} more asked", count);
  return ResourceExhaustedError(
      fmt::format("uid {}: leases quota {} exceeded ({} leases held{}); release some first", uid,
                  quota_.leases, held, asked));
}

void UidQuotaTable::AddPending(uid_t uid, std::uint64_t bytes) {
  usage_[uid].pending_bytes += bytes;
}

void UidQuotaTable::RemovePending(uid_t uid, std::uint64_t bytes) {
  Usage& usage = usage_[uid];
  usage.pending_bytes -= std::min(bytes, usage.pending_bytes);
  EraseIfIdle(uid);
}

void UidQuotaTable::AddPublished(uid_t uid, std::uint64_t bytes) {
  usage_[uid].published_bytes += bytes;
}

void UidQuotaTable::RemovePublished(uid_t uid, std::uint64_t bytes) {
  Usage& usage = usage_[uid];
  usage.published_bytes -= std::min(bytes, usage.published_bytes);
  EraseIfIdle(uid);
}

void UidQuotaTable::AddLeases(uid_t uid, std::uint64_t count) { usage_[uid].leases += count; }

void UidQuotaTable::RemoveLeases(uid_t uid, std::uint64_t count) {
  Usage& usage = usage_[uid];
  usage.leases -= std::min(count, usage.leases);
  EraseIfIdle(uid);
}

void UidQuotaTable::AddSession(uid_t uid) { ++usage_[uid].sessions; }

void UidQuotaTable::RemoveSession(uid_t uid) {
  Usage& usage = usage_[uid];
  if (usage.sessions > 0) --usage.sessions;
  EraseIfIdle(uid);
}

void UidQuotaTable::EraseIfIdle(uid_t uid) {
  auto found = usage_.find(uid);
  if (found == usage_.end()) return;
  const Usage& usage = found->second;
  if (usage.pending_bytes == 0 && usage.published_bytes == 0 && usage.leases == 0 &&
      usage.sessions == 0) {
    usage_.erase(found);
  }
}

void UidQuotaTable::FillStats(v1::StatsResponse& response) const {
  std::vector<uid_t> uids;
  uids.reserve(usage_.size());
  for (const auto& [uid, usage] : usage_) uids.push_back(uid);
  std::ranges::sort(uids);
  for (uid_t uid : uids) {
    const Usage& usage = usage_.at(uid);
    v1::UidUsage& shown = *response.add_uids();
    shown.set_uid(uid);
    shown.set_pending_bytes(usage.pending_bytes);
    shown.set_published_bytes(usage.published_bytes);
    shown.set_leases(usage.leases);
    shown.set_sessions(usage.sessions);
  }
}

}  // namespace hurray::daemon
