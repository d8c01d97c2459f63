// TensorCache: the latest decoded version per name, of one daemon epoch, bounded.
#include "tensor_cache.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace hurray::client_internal {
namespace {

// A tensor of no buffers in host memory.
DecodedTensor Decoded(std::string name, std::uint64_t version, std::uint64_t version_id,
                      std::uint64_t epoch) {
  return DecodedTensor{.name = std::move(name),
                       .version = version,
                       .daemon_epoch = epoch,
                       .version_id = version_id,
                       .directory_entry = 0,
                       .descriptor = TensorDescriptor::Dense(ElementType::kUint8, {0}).value(),
                       .buffers = {},
                       .device = {},
                       .sync_mode = SyncMode::kProducerSynced,
                       .fence = {}};
}

std::shared_ptr<const DecodedTensor> Tensor(std::string name, std::uint64_t version,
                                            std::uint64_t version_id, std::uint64_t epoch = 7) {
  return std::make_shared<const DecodedTensor>(
      Decoded(std::move(name), version, version_id, epoch));
}

TEST(TensorCacheTest, FindsAnInsertedTensorByNameAndByIdentity) {
  TensorCache cache;
  const auto tensor = Tensor("ns/a", 3, 41);
  cache.Insert(tensor);
  EXPECT_EQ(cache.Find("ns/a"), tensor);
  EXPECT_EQ(cache.Find("ns/a", 41, 7), tensor);
  EXPECT_EQ(cache.Find("ns/a", 42, 7), nullptr);  // Another version's identity.
  EXPECT_EQ(cache.Find("ns/a", 41, 8), nullptr);  // Another epoch.
  EXPECT_EQ(cache.Find("ns/b"), nullptr);
}

TEST(TensorCacheTest, TensorWithoutIdentityIsNotKept) {
  TensorCache cache;
  cache.Insert(Tensor("ns/a", 1, 0));
  EXPECT_EQ(cache.Find("ns/a"), nullptr);
  EXPECT_EQ(cache.Find("ns/a", 0, 7), nullptr);
}

TEST(TensorCacheTest, DeviceTensorIsNotKept) {
  DecodedTensor tensor = Decoded("ns/gpu", 1, 5, 7);
  tensor.device.device_tag = DeviceTag::Cuda();
  TensorCache cache;
  cache.Insert(std::make_shared<const DecodedTensor>(std::move(tensor)));
  EXPECT_EQ(cache.Find("ns/gpu"), nullptr);
}

TEST(TensorCacheTest, LaterInsertReplacesTheNamesTensorEvenWithALowerNumber) {
  TensorCache cache;
  cache.Insert(Tensor("ns/a", 5, 50));
  // Deleted and published anew: numbered from 1 again, a new identity.
  const auto renewed = Tensor("ns/a", 1, 60);
  cache.Insert(renewed);
  EXPECT_EQ(cache.Find("ns/a"), renewed);
  EXPECT_EQ(cache.Find("ns/a", 50, 7), nullptr);
}

TEST(TensorCacheTest, TensorOfAnotherEpochEmptiesTheCache) {
  TensorCache cache;
  cache.Insert(Tensor("ns/a", 1, 10, /*epoch=*/7));
  cache.Insert(Tensor("ns/b", 1, 11, /*epoch=*/9));
  EXPECT_EQ(cache.Find("ns/a"), nullptr);
  EXPECT_NE(cache.Find("ns/b", 11, 9), nullptr);
}

TEST(TensorCacheTest, EraseForgetsOnlyTheNameOfItsEpoch) {
  TensorCache cache;
  cache.Insert(Tensor("ns/a", 1, 10));
  cache.Erase("ns/a", /*epoch=*/8);
  EXPECT_NE(cache.Find("ns/a"), nullptr);
  cache.Erase("ns/a", /*epoch=*/7);
  EXPECT_EQ(cache.Find("ns/a"), nullptr);
}

TEST(TensorCacheTest, HoldsAtMostItsBoundOfNames) {
  TensorCache cache;
  for (std::size_t i = 0; i < TensorCache::kMaxNames + 10; ++i) {
    cache.Insert(Tensor("ns/t" + std::to_string(i), 1, i + 1));
  }
  std::size_t kept = 0;
  for (std::size_t i = 0; i < TensorCache::kMaxNames + 10; ++i) {
    kept += cache.Find("ns/t" + std::to_string(i)) != nullptr ? 1 : 0;
  }
  EXPECT_EQ(kept, TensorCache::kMaxNames);
  // The newest is always kept.
  EXPECT_NE(cache.Find("ns/t" + std::to_string(TensorCache::kMaxNames + 9)), nullptr);
}

}  // namespace
}  // namespace hurray::client_internal
