// The DLPack 0.6 export of a tensor's dense data: a "dltensor" capsule holding a
// DLManagedTensor (Debian's libdlpack-dev: dlpack/dlpack.h 0.6), as __dlpack__ returns it
// to torch.from_dlpack, numpy.from_dlpack and other consumers.
#pragma once

#include <pybind11/pybind11.h>

#include <memory>

#include "client_arrays.h"
#include "hurray/client.h"

namespace hurray::python {

// A "dltensor" capsule over `data` (a host or device address, as `device` says) laid out as
// `spec`. The DLManagedTensor holds a reference to `owner` (the memory's keeper, a lease)
// until the consumer calls its deleter, or until the capsule dies unconsumed; the deleter
// needs no GIL. hurray.UnsupportedError for an element type DLPack cannot express
// (float8, 4-bit). Needs the GIL.
[[nodiscard]] pybind11::capsule MakeDLPackCapsule(const void* data, const ArraySpec& spec,
                                                  const DeviceInfo& device,
                                                  std::shared_ptr<const void> owner);

}  // namespace hurray::python
