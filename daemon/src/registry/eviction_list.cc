#include "registry/eviction_list.h"

#include "registry/version_store.h"

namespace hurray::daemon {

void EvictionList::Add(TensorVersion* version) {
  Order& order = by_pool_[version->pool];
  positions_.emplace(version, order.insert(order.end(), version));
}

void EvictionList::Touch(TensorVersion* version) {
  auto position = positions_.find(version);
  if (position == positions_.end()) return;
  Order& order = by_pool_[version->pool];
  order.splice(order.end(), order, position->second);
}

void EvictionList::Remove(TensorVersion* version) {
  auto position = positions_.find(version);
  if (position == positions_.end()) return;
  auto order = by_pool_.find(version->pool);
  order->second.erase(position->second);
  if (order->second.empty()) by_pool_.erase(order);
  positions_.erase(position);
}

TensorVersion* EvictionList::Oldest(const Pool* pool,
                                    const std::function<bool(const TensorVersion&)>& held) const {
  auto order = by_pool_.find(pool);
  if (order == by_pool_.end()) return nullptr;
  // Leased (or otherwise held) versions stay where they are: they become candidates again
  // once released, in the order they were last used.
  for (TensorVersion* version : order->second) {
    if (version->lease_count == 0 && !(held && held(*version))) return version;
  }
  return nullptr;
}

}  // namespace hurray::daemon
