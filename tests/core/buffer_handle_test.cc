#include "hurray/buffer_handle.h"

#include <gtest/gtest.h>

#include <vector>

#include "testing/status_matchers.h"

namespace hurray {
namespace {

using testing::FailsWith;

TEST(DeviceTagTest, NamedTagsRoundTrip) {
  for (std::uint8_t byte = 0x00; byte <= 0x08; ++byte) {
    auto tag = DeviceTag::FromByte(byte);
    ASSERT_OK(tag);
    EXPECT_EQ(tag->ToByte(), byte);
    EXPECT_FALSE(tag->IsPrivate());
  }
  EXPECT_EQ(DeviceTag::FromByte(0x01).value(), DeviceTag::Cuda());
  EXPECT_EQ(DeviceTag::Cuda().Name(), "cuda");
  EXPECT_EQ(DeviceTag::Hexagon().ToByte(), 0x08);
}

TEST(DeviceTagTest, ReservedRangeIsRejected) {
  EXPECT_ERROR(DeviceTag::FromByte(0x09), StatusCode::kInvalidArgument,
               {"device_tag 0x09", "reserved"});
  EXPECT_ERROR(DeviceTag::FromByte(0x80), StatusCode::kInvalidArgument, {"reserved"});
  EXPECT_ERROR(DeviceTag::FromByte(0xEF), StatusCode::kInvalidArgument, {"0xEF", "reserved"});
}

TEST(DeviceTagTest, PrivateRangeIsAcceptedAndMarked) {
  for (int byte = 0xF0; byte <= 0xFE; ++byte) {
    auto tag = DeviceTag::FromByte(static_cast<std::uint8_t>(byte));
    ASSERT_OK(tag);
    EXPECT_TRUE(tag->IsPrivate());
    EXPECT_EQ(tag->Name(), "private");
  }
}

TEST(DeviceTagTest, FfIsInvalid) {
  EXPECT_ERROR(DeviceTag::FromByte(0xFF), StatusCode::kInvalidArgument, {"0xFF", "invalid"});
}

TEST(MemoryClassTest, NamedClassesRoundTrip) {
  EXPECT_EQ(MemoryClass::FromByte(0x02).value(), MemoryClass::Unified());
  EXPECT_EQ(MemoryClass::Unified().ToByte(), 0x02);
  EXPECT_EQ(MemoryClass::HostPinned().Name(), "host_pinned");
  EXPECT_EQ(MemoryClass::Peer().ToByte(), 0x03);
}

TEST(MemoryClassTest, ReservedInvalidAndPrivateRanges) {
  EXPECT_ERROR(MemoryClass::FromByte(0x04), StatusCode::kInvalidArgument,
               {"memory_class 0x04", "reserved"});
  EXPECT_ERROR(MemoryClass::FromByte(0xEF), StatusCode::kInvalidArgument, {"reserved"});
  EXPECT_ERROR(MemoryClass::FromByte(0xFF), StatusCode::kInvalidArgument, {"invalid"});
  auto vendor = MemoryClass::FromByte(0xF1);
  ASSERT_OK(vendor);
  EXPECT_TRUE(vendor->IsPrivate());
}

TEST(SyncModeTest, OnlyThreeModesExist) {
  EXPECT_EQ(SyncModeFromByte(0x00).value(), SyncMode::kProducerSynced);
  EXPECT_EQ(SyncModeFromByte(0x01).value(), SyncMode::kEvent);
  EXPECT_EQ(SyncModeFromByte(0x02).value(), SyncMode::kConsumerStream);
  EXPECT_ERROR(SyncModeFromByte(0x03), StatusCode::kInvalidArgument, {"sync_mode 0x03"});
  EXPECT_EQ(SyncModeName(SyncMode::kConsumerStream), "consumer_stream");
}

TEST(BufferHandleTest, CreatesCpuBufferWithSimdAlignment) {
  auto handle =
      BufferHandle::Create(1024, kMinBufferAlignment, DeviceTag::Cpu(), SyncMode::kProducerSynced);
  ASSERT_OK(handle);
  EXPECT_EQ(handle->byte_size(), 1024u);
  EXPECT_EQ(handle->alignment(), 64u);
  EXPECT_EQ(handle->device_tag(), DeviceTag::Cpu());
  EXPECT_EQ(handle->memory_class(), MemoryClass::Standard());
  EXPECT_EQ(handle->sync_mode(), SyncMode::kProducerSynced);
  EXPECT_FALSE(handle->IsEmpty());
}

TEST(BufferHandleTest, AlignmentMustBeAPowerOfTwo) {
  EXPECT_ERROR(BufferHandle::Create(512, 63, DeviceTag::Cpu(), SyncMode::kProducerSynced),
               StatusCode::kInvalidArgument, {"alignment 63", "power of two"});
  EXPECT_ERROR(BufferHandle::Create(512, 0, DeviceTag::Cpu(), SyncMode::kProducerSynced),
               StatusCode::kInvalidArgument, {"alignment 0"});
  EXPECT_ERROR(BufferHandle::Create(0, 3, DeviceTag::Cpu(), SyncMode::kProducerSynced),
               StatusCode::kInvalidArgument, {"alignment 3"});
}

TEST(BufferHandleTest, NonEmptyBufferNeedsAtLeast64) {
  EXPECT_ERROR(BufferHandle::Create(512, 32, DeviceTag::Cpu(), SyncMode::kProducerSynced),
               StatusCode::kInvalidArgument, {"alignment 32", "minimum 64"});
  EXPECT_OK(BufferHandle::Create(512, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced));
  EXPECT_OK(BufferHandle::Create(8192, kPageAlignment, DeviceTag::Cuda(), SyncMode::kEvent));
}

TEST(BufferHandleTest, EmptyBufferWaivesTheMinimum) {
  auto empty = BufferHandle::Create(0, 1, DeviceTag::Cpu(), SyncMode::kProducerSynced);
  ASSERT_OK(empty);
  EXPECT_TRUE(empty->IsEmpty());
  EXPECT_OK(BufferHandle::Create(0, 16, DeviceTag::Cpu(), SyncMode::kProducerSynced));
  const BufferHandle made = BufferHandle::Empty(DeviceTag::Cuda());
  EXPECT_EQ(made.byte_size(), 0u);
  EXPECT_EQ(made.alignment(), 1u);
  EXPECT_EQ(made.device_tag(), DeviceTag::Cuda());
}

TEST(ColocationTest, SameDeviceAndClassPasses) {
  std::vector<BufferHandle> buffers = {
      *BufferHandle::Create(1024, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced),
      *BufferHandle::Create(16, 64, DeviceTag::Cpu(), SyncMode::kEvent)};
  auto device = ValidateColocation(buffers);
  ASSERT_OK(device);
  EXPECT_EQ(*device, DeviceTag::Cpu());
}

TEST(ColocationTest, MixedDevicesAreRejected) {
  std::vector<BufferHandle> buffers = {
      *BufferHandle::Create(1024, 64, DeviceTag::Cpu(), SyncMode::kProducerSynced),
      *BufferHandle::Create(256, 4096, DeviceTag::Cuda(), SyncMode::kProducerSynced)};
  EXPECT_ERROR(ValidateColocation(buffers), StatusCode::kInvalidArgument,
               {"buffer 1", "device_tag 0x01", "0x00"});
}

TEST(ColocationTest, MixedMemoryClassesAreRejected) {
  std::vector<BufferHandle> buffers = {
      *BufferHandle::Create(4096, 4096, DeviceTag::Cuda(), SyncMode::kEvent),
      *BufferHandle::Create(4096, 4096, DeviceTag::Cuda(), SyncMode::kEvent,
                            MemoryClass::Unified())};
  EXPECT_ERROR(ValidateColocation(buffers), StatusCode::kInvalidArgument,
               {"buffer 1", "memory_class 0x02", "0x00"});
}

}  // namespace
}  // namespace hurray
