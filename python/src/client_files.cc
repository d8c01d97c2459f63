#include "client_files.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "errors.h"
#include "hurray/file_transfer.h"

namespace hurray::python {
namespace {

namespace py = pybind11;

constexpr std::string_view kHrrySuffix = ".hrry";

// A Python progress callable called from a transfer that runs without the GIL. The first
// exception it raises is kept and the callable is not called again. Needs the GIL to be made,
// raised and destroyed.
class ProgressCallback {
 public:
  explicit ProgressCallback(py::object callable) : callable_(std::move(callable)) {}

  // FileTransferOptions::progress: empty for None.
  [[nodiscard]] std::function<void(std::uint64_t, std::uint64_t)> Function() {
    if (callable_.is_none()) return {};
    return [this](std::uint64_t done, std::uint64_t total) {
      const py::gil_scoped_acquire acquire;
      if (error_) return;
      try {
        callable_(done, total);
      } catch (py::error_already_set& error) {
        error_.emplace(std::move(error));
      }
    };
  }

  // Raises the exception the callable raised, if it did.
  void RaiseIfFailed() {
    if (error_) throw std::move(*error_);
  }

 private:
  py::object callable_;
  std::optional<py::error_already_set> error_;
};

// Runs `transfer` (an ImportTensorFile or SaveTensors call) without the GIL and returns its
// summary as a dict; the progress callable's exception first, else the transfer's error.
template <typename Transfer>
py::dict Run(const py::object& progress, Transfer&& transfer) {
  ProgressCallback callback(progress);
  FileTransferOptions options;
  options.progress = callback.Function();
  Result<FileTransferSummary> summary = [&] {
    const py::gil_scoped_release release;
    return transfer(options);
  }();
  callback.RaiseIfFailed();
  const FileTransferSummary value = ValueOrRaise(std::move(summary));
  py::dict out;
  out["tensors"] = value.tensors;
  out["bytes"] = value.bytes;
  out["seconds"] = std::chrono::duration<double>(value.elapsed).count();
  return out;
}

std::string PathOf(const py::object& path) {
  return py::module_::import("os").attr("fspath")(path).cast<std::string>();
}

void CheckFormat(const std::string& path, ImportedFormat format) {
  const bool hrry = path.ends_with(kHrrySuffix);
  if (format == ImportedFormat::kHrry && !hrry) {
    throw ToPython(
        InvalidArgumentError(fmt::format("load reads .hrry files; path {} does not end in {} "
                                         "(import_safetensors reads safetensors models)",
                                         path, kHrrySuffix))
            .error());
  }
  if (format == ImportedFormat::kSafetensors && hrry) {
    throw ToPython(InvalidArgumentError(
                       fmt::format("import_safetensors reads safetensors models; path {} is a "
                                   ".hrry file (load reads those)",
                                   path))
                       .error());
  }
}

}  // namespace

py::dict ImportFile(Client& client, const py::object& path_object, ImportedFormat format,
                    const std::string& prefix, const std::optional<std::string>& pool,
                    const py::object& progress) {
  const std::string path = PathOf(path_object);
  CheckFormat(path, format);
  return Run(progress, [&](FileTransferOptions& options) {
    options.prefix = prefix;
    options.pool = pool.value_or("");
    return ImportTensorFile(client, path, options);
  });
}

py::dict SaveFile(Client& client, const std::string& prefix, const py::object& path_object,
                  const py::object& progress) {
  const std::string path = PathOf(path_object);
  return Run(progress, [&](const FileTransferOptions& options) {
    return SaveTensors(client, prefix, path, options);
  });
}

}  // namespace hurray::python
