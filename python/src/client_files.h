// Model files in and out of the daemon's pools for hurray.Client — import_safetensors, load
// and save — over client/include/hurray/file_transfer.h. Defined in client_files.cc.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <optional>
#include <string>

#include "hurray/client.h"

namespace hurray::python {

// What a file holds, as the caller of an import expects it.
enum class ImportedFormat : std::uint8_t { kSafetensors, kHrry };

// `path` is a str or an os.PathLike. Publishes every tensor of the file at `path` under `prefix` +
// its name, all at once (ImportTensorFile), into `pool` (None: the daemon's default). `progress`,
// None or a callable(bytes_done, bytes_total), runs on this thread with the GIL.
// InvalidArgumentError for a path whose name says it is not `format` (".hrry" is the one .hrry
// suffix); the errors of ImportTensorFile; an exception `progress` raised (it is not called again,
// the import runs to its end first). Returns the summary: {"tensors", "bytes", "seconds"}. Releases
// the GIL while it works.
[[nodiscard]] pybind11::dict ImportFile(Client& client, const pybind11::object& path,
                                        ImportedFormat format, const std::string& prefix,
                                        const std::optional<std::string>& pool,
                                        const pybind11::object& progress);

// Writes every tensor published under `prefix` to a .hrry file at `path` (SaveTensors);
// `progress` and the result as for ImportFile.
[[nodiscard]] pybind11::dict SaveFile(Client& client, const std::string& prefix,
                                      const pybind11::object& path,
                                      const pybind11::object& progress);

}  // namespace hurray::python
