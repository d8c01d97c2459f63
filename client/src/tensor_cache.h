// TensorCache: the latest decoded version of each recently acquired name, so that acquiring
// a version this process has decoded before neither decodes its descriptor nor maps its
// buffers again, and the fast path knows what to pin. Private to the client module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "decoded_tensor.h"

namespace hurray::client_internal {

// Holds cacheable DecodedTensors (DecodedTensor::cacheable) of one daemon epoch, at most one
// per name (the latest version the daemon answered with) and at most kMaxNames names: a tensor of
// another epoch empties it first (the old epoch's ids name nothing now), a name beyond the bound
// drops some other name's. A dropped tensor stays mapped while views hold it. Thread-safe.
class TensorCache {
 public:
  static constexpr std::size_t kMaxNames = 1024;

  // The tensor cached for `name`, or null.
  [[nodiscard]] std::shared_ptr<const DecodedTensor> Find(std::string_view name) const;
  // The tensor cached for `name` when it is version identity `version_id` of epoch `epoch`,
  // or null. `version_id` 0 never matches.
  [[nodiscard]] std::shared_ptr<const DecodedTensor> Find(std::string_view name,
                                                          std::uint64_t version_id,
                                                          std::uint64_t epoch) const;
  // Keeps `tensor`, when cacheable, as its name's in place of any other: the caller had it
  // from a reply that named the latest version (version numbers start again at 1 when a
  // name is deleted and published anew, so a lower number may well be the newer).
  void Insert(std::shared_ptr<const DecodedTensor> tensor);
  // Forgets `name`'s tensor of epoch `epoch` (the daemon said the name is gone).
  void Erase(std::string_view name, std::uint64_t epoch);
  // Forgets every tensor of another epoch than `epoch` (the daemon restarted: their ids name
  // nothing now, and their mappings would keep the earlier daemon's memory held).
  void ForgetOtherEpochs(std::uint64_t epoch);

 private:
  // Lets the map be searched by string_view.
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view name) const {
      return std::hash<std::string_view>{}(name);
    }
  };

  mutable std::mutex mutex_;
  // The epoch of every tensor in tensors_. Guarded by mutex_.
  std::uint64_t epoch_ = 0;
  // Guarded by mutex_.
  std::unordered_map<std::string, std::shared_ptr<const DecodedTensor>, NameHash, std::equal_to<>>
      tensors_;
};

}  // namespace hurray::client_internal
