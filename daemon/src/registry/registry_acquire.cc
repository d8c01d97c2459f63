#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "registry/registry.h"
#include "registry/registry_errors.h"
#include "registry/tensor_name.h"

namespace hurray::daemon {
namespace {

Status CheckWaitTimeout(std::uint32_t wait_timeout_ms, std::uint32_t max_wait_ms) {
  if (wait_timeout_ms <= max_wait_ms) return {};
  return InvalidArgumentError(
      fmt::format("wait_timeout_ms {} is above the limit {}", wait_timeout_ms, max_wait_ms));
}

Status ValidateBatchAcquire(const v1::BatchAcquireRequest& request, std::size_t max_names) {
  if (static_cast<std::size_t>(request.names_size()) > max_names) {
    return InvalidArgumentError(
        fmt::format("names has {} entries, above the limit {}", request.names_size(), max_names));
  }
  if (request.names_size() == 0 && request.prefix().empty()) {
    return InvalidArgumentError("names and prefix are both empty: nothing to acquire");
  }
  for (int i = 0; i < request.names_size(); ++i) {
    HURRAY_RETURN_IF_ERROR(ValidateTensorName(request.names(i), fmt::format("names[{}]", i)));
  }
  return {};
}

// True when an acquire that failed with `result` should wait for a publish.
template <typename T>
bool ShouldWait(const Result<T>& result, std::uint32_t wait_timeout_ms) {
  return !result && result.error().code() == StatusCode::kNotFound && wait_timeout_ms != 0;
}

// Release's refusal of the `unknown` lease ids among the `requested` ones (the others were
// released): "lease_id 7 is not a lease of this session", or for several "lease_ids 7, 9, 12
// and 3 more are not leases of this session; the other 5 were released".
std::string UnknownLeases(const std::vector<std::uint64_t>& unknown, int requested) {
  constexpr std::size_t kShownIds = 8;
  const std::size_t released = static_cast<std::size_t>(requested) - unknown.size();
  if (unknown.size() == 1 && released == 0) {
    return fmt::format("lease_id {} is not a lease of this session", unknown.front());
  }
  std::string ids = fmt::format(
      "{}",
      fmt::join(unknown.begin(),
                unknown.begin() + static_cast<std::ptrdiff_t>(std::min(unknown.size(), kShownIds)),
                ", "));
  if (unknown.size() > kShownIds) ids += fmt::format(" and {} more", unknown.size() - kShownIds);
  return fmt::format("{} {} {} of this session; the other {} {} released",
                     unknown.size() == 1 ? "lease_id" : "lease_ids", ids,
                     unknown.size() == 1 ? "is not a lease" : "are not leases", released,
                     released == 1 ? "was" : "were");
}

}  // namespace

Result<Registry::LeaseGrant> Registry::AcquireLocked(std::uint64_t session_id,
                                                     const std::string& name,
                                                     std::uint64_t version_number) {
  Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  // Before the lookup: a refusal says nothing of whether the name is published.
  HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, name, &session->peer, std::nullopt));
  std::shared_ptr<TensorVersion> version = versions_.Find(name, version_number);
  if (version == nullptr) {
    if (version_number != 0) {
      const std::uint64_t next = versions_.NextNumber(name);
      return NotFoundError(
          fmt::format("{} version {} is not published{}", ShownName(name), version_number,
                      version_number < next
                          ? fmt::format(" (no longer: the name's versions reached {})", next - 1)
                          : ""));
    }
    if (auto lost = lost_.find(name); lost != lost_.end()) {
      return NotFoundError(fmt::format("{} is lost: {}", ShownName(name), lost->second));
    }
    return NotFoundError(fmt::format("{} is not published", ShownName(name)));
  }
  if (version->fence && version->fence.State() == FenceState::kFailed) {
    return NotFoundError(fmt::format(
        "{} version {} is lost: its fence was poisoned (its producer ended before signalling "
        "it, or the daemon is stopping)",
        ShownName(name), version->number));
  }
  HURRAY_RETURN_IF_ERROR(uid_quotas_.CheckLease(session->peer.uid));
  const std::uint64_t lease_id = next_id_++;
  uid_quotas_.AddLease(session->peer.uid);
  leases_.Add(lease_id, Lease{.session_id = session_id, .version = version.get()});
  session->leases.insert(lease_id);
  ++version->lease_count;
  // Its identity goes to this session in the reply: from now its uid's lease pages may pin it.
  if (version->fast_path_id != 0) version->Grant(session->peer.uid);
  versions_.MarkUsed(version.get());
  const bool ready = version->fence && version->fence.State() == FenceState::kReady;
  return LeaseGrant{.lease_id = lease_id, .version = std::move(version), .ready = ready};
}

void Registry::FillAcquireResponse(const std::string& name, const LeaseGrant& grant,
                                   v1::AcquireResponse& response) const {
  response.set_lease_id(grant.lease_id);
  grant.version->FillTensorInfo(name, *response.mutable_tensor());
  if (grant.version->fence) {
    response.mutable_tensor()->mutable_handoff()->set_ready(grant.ready);
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  if (grant.version->fast_path_id != 0) {
    response.set_version_id(grant.version->fast_path_id);
    response.set_directory_entry(grant.version->directory_entry);
  }
}

Result<v1::AcquireResponse> Registry::AcquireReply(const std::string& name,
                                                   Result<LeaseGrant> grant) const {
  if (!grant) return std::unexpected(std::move(grant.error()));
  v1::AcquireResponse response;
  FillAcquireResponse(name, *grant, response);
  return response;
}

std::uint64_t Registry::Acquire(std::uint64_t session_id, const v1::AcquireRequest& request,
                                AcquireDone done) {
  Status valid = CheckWaitTimeout(request.wait_timeout_ms(), options_.max_wait_ms);
  if (valid) valid = ValidateTensorName(request.name());
  if (!valid) {
    done(std::unexpected(std::move(valid).error()));
    return 0;
  }
  std::unique_lock lock(mutex_);
  auto grant = AcquireLocked(session_id, request.name(), request.version());
  // A version published and gone is not waited for: it will not be published again.
  const bool wait =
      ShouldWait(grant, request.wait_timeout_ms()) &&
      !(request.version() != 0 && request.version() < versions_.NextNumber(request.name()));
  if (!wait) {
    lock.unlock();
    done(AcquireReply(request.name(), std::move(grant)));
    return 0;
  }
  auto shared_done = std::make_shared<AcquireDone>(std::move(done));
  auto try_complete = [this, session_id, name = request.name(), version = request.version(),
                       shared_done](Deferred& deferred) {
    auto retry = AcquireLocked(session_id, name, version);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.emplace_back([this, shared_done, name, retry = std::move(retry)]() mutable {
      (*shared_done)(AcquireReply(name, std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(lock, session_id, {request.name()}, Wait::WakeOn::kEveryPublish,
                         request.wait_timeout_ms(), std::move(try_complete), std::move(fail));
}

Result<v1::AcquireResponse> Registry::AcquireNow(std::uint64_t session_id,
                                                 const v1::AcquireRequest& request) {
  if (request.wait_timeout_ms() != 0) {
    return InvalidArgumentError(fmt::format(
        "wait_timeout_ms {}: AcquireNow does not wait (Acquire does)", request.wait_timeout_ms()));
  }
  std::optional<Result<v1::AcquireResponse>> result;
  Acquire(session_id, request,
          [&result](Result<v1::AcquireResponse> done) { result = std::move(done); });
  // Without a wait, Acquire completes before it returns.
  return std::move(*result);  // NOLINT(bugprone-unchecked-optional-access)
}

Result<Registry::LeaseGrant> Registry::AcquireLease(std::uint64_t session_id,
                                                    const std::string& name,
                                                    std::uint64_t version_number) {
  HURRAY_RETURN_IF_ERROR(ValidateTensorName(name));
  std::lock_guard lock(mutex_);
  return AcquireLocked(session_id, name, version_number);
}

Result<std::vector<Registry::NamedGrant>> Registry::BatchAcquireLocked(
    std::uint64_t session_id, const v1::BatchAcquireRequest& request) {
  // First find every version, then take the leases: all or none.
  std::vector<std::string> wanted(request.names().begin(), request.names().end());
  std::set<std::string, std::less<>> listed(wanted.begin(), wanted.end());
  const Session* session = sessions_.Find(session_id);
  if (session == nullptr) return std::unexpected(SessionEnded(session_id));
  if (!request.prefix().empty()) {
    const VersionStore::Names& names = versions_.names();
    std::size_t visited = 0;
    for (auto it = names.lower_bound(request.prefix());
         it != names.end() && HasPrefix(it->first, request.prefix()); ++it) {
      // The walk under the mutex is bounded as a list of names is, readable or not.
      if (++visited > options_.max_batch_names) {
        return InvalidArgumentError(
            fmt::format("prefix {} covers more than max_batch_names {} names: use a longer prefix",
                        ShownName(request.prefix()), options_.max_batch_names));
      }
      // A prefix takes only the names the session may read; listed names are checked below.
      if (it->second.Latest() != nullptr && access_->MayRead(it->first, &session->peer) &&
          listed.insert(it->first).second) {
        wanted.push_back(it->first);
      }
    }
  }
  for (const std::string& name : wanted) {
    // Before the lookup, as AcquireLocked: a refusal says nothing of whether it is published.
    HURRAY_RETURN_IF_ERROR(access_->Check(AccessVerb::kRead, name, &session->peer, std::nullopt));
    if (versions_.Find(name, 0) == nullptr) {
      return NotFoundError(fmt::format("{} is not published", ShownName(name)));
    }
  }
  std::vector<NamedGrant> grants;
  grants.reserve(wanted.size());
  std::set<std::string, std::less<>> done;
  for (std::string& name : wanted) {
    if (!done.insert(name).second) continue;  // Listed twice: one lease.
    auto acquired = AcquireLocked(session_id, name, 0);
    if (!acquired) {
      for (const auto& taken : grants) ReleaseLeaseLocked(taken.grant.lease_id);
      return std::unexpected(acquired.error());
    }
    grants.push_back(NamedGrant{.name = std::move(name), .grant = std::move(*acquired)});
  }
  return grants;
}

Result<v1::BatchAcquireResponse> Registry::BatchAcquireReply(
    Result<std::vector<NamedGrant>> grants) const {
  if (!grants) return std::unexpected(std::move(grants.error()));
  v1::BatchAcquireResponse response;
  response.mutable_tensors()->Reserve(static_cast<int>(grants->size()));
  for (const NamedGrant& named : *grants) {
    FillAcquireResponse(named.name, named.grant, *response.add_tensors());
  }
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

std::uint64_t Registry::BatchAcquire(std::uint64_t session_id,
                                     const v1::BatchAcquireRequest& request,
                                     BatchAcquireDone done) {
  Status valid = CheckWaitTimeout(request.wait_timeout_ms(), options_.max_wait_ms);
  if (valid) valid = ValidateBatchAcquire(request, options_.max_batch_names);
  if (!valid) {
    done(std::unexpected(std::move(valid).error()));
    return 0;
  }
  std::unique_lock lock(mutex_);
  auto grants = BatchAcquireLocked(session_id, request);
  if (!ShouldWait(grants, request.wait_timeout_ms())) {
    lock.unlock();
    done(BatchAcquireReply(std::move(grants)));
    return 0;
  }
  auto shared_done = std::make_shared<BatchAcquireDone>(std::move(done));
  auto try_complete = [this, session_id, request, shared_done](Deferred& deferred) {
    auto retry = BatchAcquireLocked(session_id, request);
    if (!retry && retry.error().code() == StatusCode::kNotFound) return false;
    deferred.emplace_back([this, shared_done, retry = std::move(retry)]() mutable {
      (*shared_done)(BatchAcquireReply(std::move(retry)));
    });
    return true;
  };
  auto fail = [shared_done](Error error) { (*shared_done)(std::unexpected(std::move(error))); };
  return StartWaitLocked(lock, session_id, {request.names().begin(), request.names().end()},
                         Wait::WakeOn::kAllPublished, request.wait_timeout_ms(),
                         std::move(try_complete), std::move(fail));
}

void Registry::ReleaseLeaseLocked(std::uint64_t lease_id) {
  const Lease* lease = leases_.Find(lease_id);
  if (lease == nullptr) return;
  TensorVersion* version = lease->version;
  if (Session* session = sessions_.Find(lease->session_id)) {
    session->leases.erase(lease_id);
    uid_quotas_.RemoveLease(session->peer.uid);
  }
  leases_.Remove(lease_id);
  --version->lease_count;
  versions_.ReclaimIfUnused(version);
}

Result<v1::ReleaseResponse> Registry::Release(std::uint64_t session_id,
                                              const v1::ReleaseRequest& request) {
  std::vector<std::uint64_t> unknown;
  {
    std::lock_guard lock(mutex_);
    for (std::uint64_t lease_id : request.lease_ids()) {
      const Lease* lease = leases_.Find(lease_id);
      if (lease == nullptr || lease->session_id != session_id) {
        unknown.push_back(lease_id);
        continue;
      }
      ReleaseLeaseLocked(lease_id);
    }
  }
  if (!unknown.empty()) return NotFoundError(UnknownLeases(unknown, request.lease_ids_size()));
  v1::ReleaseResponse response;
  response.set_daemon_epoch(options_.daemon_epoch);
  return response;
}

}  // namespace hurray::daemon
