// Conversion between TensorDescriptor and its protobuf message, for code that carries the
// descriptor inside other messages (the daemon's gRPC service, files). Thread-safe.
#pragma once

#include "hurray/tensor_descriptor.h"
#include "hurray/v1/descriptor.pb.h"

namespace hurray {

// Validates a message exactly as TensorDescriptor::Decode does after parsing.
[[nodiscard]] Result<TensorDescriptor> DescriptorFromProto(const v1::TensorDescriptor& message);

// The message of a descriptor; every layout and quantization is written explicitly.
[[nodiscard]] v1::TensorDescriptor DescriptorToProto(const TensorDescriptor& descriptor);

}  // namespace hurray
