// What the client module does with TensorViews beyond their public API: builds them from
// the daemon's acquire replies, ends many leases at once, and fills a tensor's page tables.
// Defined in tensor_view.cc. Private to the client module
// (client.h declares it a friend of TensorView; nothing outside client/src includes this).
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "hurray/client.h"
#include "hurray/error.h"
#include "hurray/v1/exchange.pb.h"

namespace hurray::client_internal {

class Connection;
struct DecodedTensor;
class FastPathPin;
class TensorCache;

// Static functions only; each is as thread-safe as the views it is given (one thread at a
// time per view).
class TensorViewAccess {
 public:
  TensorViewAccess() = delete;

  // A view that holds the reply's lease, granted in daemon epoch `epoch` (the reply's, or
  // for a batch the batch's), on the acquired tensor: `cache`'s when it holds that version
  // (its identity, version_id), else decoded and mapped (DecodeTensor's errors; the lease
  // is then the caller's to release) and offered to `cache` (null: none). Populates its
  // page tables when `populate`.
  [[nodiscard]] static Result<TensorView> FromReply(const std::shared_ptr<Connection>& connection,
                                                    const v1::AcquireResponse& reply,
                                                    std::uint64_t epoch, bool populate,
                                                    TensorCache* cache);

  // A view of `tensor` held by a fast-path pin instead of a lease.
  [[nodiscard]] static TensorView FromPin(const std::shared_ptr<Connection>& connection,
                                          std::shared_ptr<const DecodedTensor> tensor,
                                          FastPathPin pin);

  // INVALID_ARGUMENT naming the first view that holds a lease of another connection than
  // `connection`; OK when there is none. Changes nothing.
  [[nodiscard]] static Status CheckAllOf(const Connection& connection,
                                         std::span<const TensorView> views);

  // Ends the leases of every view that holds one (each of them `connection`'s, as
  // CheckAllOf checked) in as few requests as Client::Release promises. Every view is empty
  // afterwards, whatever the outcome.
  [[nodiscard]] static Status ReleaseAll(Connection& connection, std::span<TensorView> views);

  // Empties `view` without ending its lease, which the caller ends some other way.
  static void Forget(TensorView& view);

  // A new CUDA event (a CUevent; the pointer is the shared_ptr's) of the view's device that
  // completes once the view's data is ready: recorded on the client's own stream after a
  // wait for the fence (at once for a ProducerSynced view, or one ready at acquire). The
  // shared_ptr destroys the event and keeps the view's connection alive until then.
  // FAILED_PRECONDITION on an empty view or one of a CPU pool; the driver's errors.
  [[nodiscard]] static Result<std::shared_ptr<void>> ReadyEvent(const TensorView& view);
};

// Ends `lease_ids` (of daemon epoch `epoch`) in requests of at most
// Client::kMaxLeasesPerRelease ids. The daemon ends every lease of a request that it knows,
// so one stale id costs the others nothing. Returns the first error.
Status ReleaseLeases(Connection& connection, std::span<const std::uint64_t> lease_ids,
                     std::uint64_t epoch);

// Ends lease `lease_id` of daemon epoch `epoch`: ReleaseLeases of one id.
inline Status ReleaseLease(Connection& connection, std::uint64_t lease_id, std::uint64_t epoch) {
  return ReleaseLeases(connection, std::span(&lease_id, 1), epoch);
}

// Fills this process's page tables for the tensor's host buffers (AcquireOptions::populate).
void PopulateTensor(const DecodedTensor& tensor);

}  // namespace hurray::client_internal
