// TensorImport: the one way the tensors of a model file get into memory that someone else
// owns and become visible there, all together. hurrayctl import and ImportTensorFile (the
// C++ and Python clients) run it over a sink made of the client's Allocate and PublishBatch;
// the daemon's [[preload]] over a sink made of its pool and registry.
//
//   HURRAY_ASSIGN_OR_RETURN(const TensorImport import,
//                           TensorImport::Open("model.safetensors", {.prefix = "llama/"}));
//   MySink sink(...);                        // a TensorImport::Sink
//   HURRAY_RETURN_IF_ERROR(import.Run(sink));
//   // every tensor of the file is now published under llama/<its name>, all at once
//
// Open lists the file (TensorFile::Open: every header, size and offset checked against the
// file and each other) and checks every name a tensor will be published under; nothing is
// allocated yet. Run asks the sink for each tensor's buffers in file order, reads the file
// straight into them (TensorFile::Read: large reads, several in flight, no intermediate
// copy, .hrry checksums checked), then asks the sink to publish them all. Every error of
// Open and Run names the file, and the tensor where one tensor is at fault.
//
// Move-only; owns the open file. Run is const: it may run on several threads at once, each
// with a sink of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hurray/error.h"
#include "hurray/file_reads.h"
#include "hurray/tensor_descriptor.h"
#include "hurray/tensor_file.h"

namespace hurray {

class TensorImport {
 public:
  // Where the tensors go: an importer's own allocation and publication. Run calls it on
  // Run's thread only: Allocate once per tensor, then PublishAll once, unless an error ends
  // the import first. After an error Run calls nothing more; what the sink allocated is
  // its owner's to free (a sink should free it when destroyed, so that dropping it is
  // enough).
  class Sink {
   public:
    virtual ~Sink() = default;

    // Allocates the tensor to be published under `name` (the prefix and its name in the
    // file, a valid tensor name) with `descriptor` (as the file gives it), and returns its
    // buffers: one writable span per entry of descriptor.buffers(), each of exactly that
    // entry's byte_size (Run refuses others as INTERNAL). The spans must stay valid until
    // PublishAll is called or the sink is destroyed. An error ends the import; Run adds the
    // file and the tensor to it.
    [[nodiscard]] virtual Result<std::vector<std::span<std::byte>>> Allocate(
        const std::string& name, const TensorDescriptor& descriptor) = 0;

    // Publishes every tensor Allocate gave, each under its name, all at once or none at
    // all. Called once every byte is in; nothing writes the spans after this call begins,
    // so the sink may unmap them first. An error ends the import; Run adds the file to it.
    [[nodiscard]] virtual Status PublishAll() = 0;
  };

  struct Options {
    // Prepended to each tensor's name in the file; each result must be a tensor name
    // (tensor_name.h).
    std::string prefix;
    // Most tensors one import may carry (the limit of the sink's publication of them all);
    // 0: no limit.
    std::size_t max_tensors = 0;
  };

  // Opens the file at `path` (TensorFile::Open: .safetensors, *.safetensors.index.json or
  // .hrry) and names its tensors. The errors of TensorFile::Open (naming file, tensor and
  // field); INVALID_ARGUMENT for a file of no tensors, of more than options.max_tensors, or
  // with a tensor whose prefixed name is not a tensor name (naming the tensor and the
  // prefix). Each error names `path`.
  [[nodiscard]] static Result<TensorImport> Open(const std::string& path, const Options& options);

  // As given to Open.
  [[nodiscard]] const std::string& path() const { return path_; }
  // The file's tensors, descriptors and total bytes.
  [[nodiscard]] const TensorFile& file() const { return file_; }
  // The names the tensors are published under, in file().tensors() order.
  [[nodiscard]] std::span<const std::string> names() const { return names_; }

  // Allocates every tensor through `sink`, reads the file into the buffers it gave, and
  // publishes them all through it. `options` go to TensorFile::Read: parallelism, progress
  // (bytes done of file().total_bytes(), on this thread) and stop. Errors, each naming the
  // file: the sink's, with the tensor for Allocate's ("allocating tensor \"w\""); INTERNAL
  // naming the tensor and the buffer for buffers that do not match the descriptor; the
  // errors of TensorFile::Read (DATA_LOSS for a file cut short since Open, naming the
  // offset, or for a .hrry buffer whose checksum differs, naming the tensor); CANCELLED
  // when options.stop is requested before PublishAll. PublishAll is called only when
  // everything else succeeded.
  [[nodiscard]] Status Run(Sink& sink, const FileReadOptions& options = {}) const;

 private:
  TensorImport(std::string path, TensorFile file, std::vector<std::string> names);

  std::string path_;
  TensorFile file_;
  std::vector<std::string> names_;
};

}  // namespace hurray
