#include "tensor_cache.h"

#include <utility>

namespace hurray::client_internal {

std::shared_ptr<const DecodedTensor> TensorCache::Find(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const auto found = tensors_.find(name);
  return found == tensors_.end() ? nullptr : found->second;
}

std::shared_ptr<const DecodedTensor> TensorCache::Find(std::string_view name,
                                                       std::uint64_t version_id,
                                                       std::uint64_t epoch) const {
  if (version_id == 0) return nullptr;
  std::lock_guard lock(mutex_);
  const auto found = tensors_.find(name);
  if (found == tensors_.end() || found->second->version_id != version_id ||
      found->second->daemon_epoch != epoch) {
    return nullptr;
  }
  return found->second;
}

void TensorCache::Insert(std::shared_ptr<const DecodedTensor> tensor) {
  if (!tensor->cacheable()) return;
  ForgetOtherEpochs(tensor->daemon_epoch);
  std::lock_guard lock(mutex_);
  const auto found = tensors_.find(std::string_view(tensor->name));
  if (found != tensors_.end()) {
    found->second = std::move(tensor);
    return;
  }
  if (tensors_.size() >= kMaxNames) tensors_.erase(tensors_.begin());
  std::string name = tensor->name;
  tensors_.emplace(std::move(name), std::move(tensor));
}

void TensorCache::Erase(std::string_view name, std::uint64_t epoch) {
  std::lock_guard lock(mutex_);
  if (epoch != epoch_) return;
  if (const auto found = tensors_.find(name); found != tensors_.end()) tensors_.erase(found);
}

void TensorCache::ForgetOtherEpochs(std::uint64_t epoch) {
  decltype(tensors_) forgotten;  // Unmapped after the lock is released.
  std::lock_guard lock(mutex_);
  if (epoch == epoch_) return;
  forgotten.swap(tensors_);
  epoch_ = epoch;
}

}  // namespace hurray::client_internal
