// Tensor names: "namespace/name" (hurray/tensor_name.h, shared with the clients).
#pragma once

#include "hurray/tensor_name.h"

namespace hurray::daemon {

using hurray::HasPrefix;
using hurray::kMaxNamePartBytes;
using hurray::kMaxTensorNameBytes;
using hurray::ValidateTensorName;

}  // namespace hurray::daemon
