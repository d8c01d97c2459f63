// Writes the seed corpus of hrry_reader_fuzzer into the directory given as its one argument:
// .hrry files written by FileWriter (no tensors; dense with metadata; per-channel quantized;
// COO; block-paged; an empty tensor; several at once), and broken variants of one (a bad
// magic, a truncation, a flipped data byte). Each is opened with FileReader before it is
// kept; the run fails if a valid_ seed is refused.
//
// Usage: make_hrry_reader_corpus tests/fuzz/corpus/hrry_reader
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "hurray/file_reader.h"
#include "hurray/file_writer.h"

namespace hurray {
namespace {

namespace fs = std::filesystem;

TensorDescriptor Must(Result<TensorDescriptor> descriptor) {
  if (!descriptor) {
    std::fprintf(stderr, "seed descriptor: %s\n", descriptor.error().ToString().c_str());
    std::exit(1);
  }
  return *std::move(descriptor);
}

TensorDescriptor WithBuffers(TensorDescriptor::Parts parts) {
  return Must(TensorDescriptor::WithImpliedBuffers(std::move(parts)));
}

std::vector<TensorDescriptor> Descriptors() {
  std::vector<TensorDescriptor> all;
  TensorDescriptor::Parts dense{.element_type = ElementType::kFloat32, .shape = {4, 16}};
  dense.metadata = {{"source", "corpus"}};
  all.push_back(WithBuffers(dense));
  TensorDescriptor::Parts quantized{.element_type = ElementType::kInt8, .shape = {4, 8}};
  quantized.quantization =
      PerChannelAffine{.axis = 0,
                       .scale_buffer = 1,
                       .scale_type = ElementType::kFloat32,
                       .zero_points = ZeroPoints{.buffer = 2, .type = ElementType::kInt8}};
  all.push_back(WithBuffers(quantized));
  TensorDescriptor::Parts coo{.element_type = ElementType::kFloat32, .shape = {8, 8}};
  coo.layout = CooLayout{.values_buffer = 0, .indices_buffer = 1, .nnz = 5};
  all.push_back(WithBuffers(coo));
  TensorDescriptor::Parts paged{.element_type = ElementType::kFloat16, .shape = {8, 4}};
  paged.layout =
      BlockPagedLayout{.data_buffer = 0, .page_table_buffer = 1, .block_size = 4, .num_pages = 2};
  all.push_back(WithBuffers(paged));
  all.push_back(Must(TensorDescriptor::Dense(ElementType::kUint8, {0})));
  return all;
}

// Writes the tensors at `indices` of Descriptors() to `path`, filled with a byte pattern.
void Save(const fs::path& path, const std::vector<std::size_t>& indices) {
  const std::vector<TensorDescriptor> descriptors = Descriptors();
  auto writer = FileWriter::Create(path);
  if (!writer) std::exit((std::fprintf(stderr, "%s\n", writer.error().ToString().c_str()), 1));
  for (std::size_t index : indices) {
    const TensorDescriptor& descriptor = descriptors[index];
    std::vector<std::vector<std::byte>> bytes;
    std::vector<std::span<const std::byte>> spans;
    for (const BufferHandle& buffer : descriptor.buffers()) {
      bytes.emplace_back(buffer.byte_size(), static_cast<std::byte>(index + 1));
    }
    spans.reserve(bytes.size());
    for (const auto& buffer : bytes) spans.emplace_back(buffer);
    auto status = writer->WriteTensor("t" + std::to_string(index), descriptor, spans);
    if (!status) std::exit((std::fprintf(stderr, "%s\n", status.error().ToString().c_str()), 1));
  }
  if (auto status = writer->Finish(); !status) {
    std::exit((std::fprintf(stderr, "%s\n", status.error().ToString().c_str()), 1));
  }
  if (!FileReader::Open(path)) std::exit((std::fprintf(stderr, "refused %s\n", path.c_str()), 1));
}

std::vector<char> Bytes(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), {}};
}

void Put(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace
}  // namespace hurray

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIRECTORY\n", argv[0]);
    return 2;
  }
  const hurray::fs::path directory = argv[1];
  hurray::fs::create_directories(directory);
  hurray::Save(directory / "valid_no_tensors", {});
  hurray::Save(directory / "valid_dense_metadata", {0});
  hurray::Save(directory / "valid_per_channel", {1});
  hurray::Save(directory / "valid_coo", {2});
  hurray::Save(directory / "valid_block_paged", {3});
  hurray::Save(directory / "valid_empty_tensor", {4});
  hurray::Save(directory / "valid_all", {0, 1, 2, 3, 4});
  std::vector<char> bytes = hurray::Bytes(directory / "valid_coo");
  std::vector<char> broken = bytes;
  broken[0] = 'X';
  hurray::Put(directory / "invalid_magic", broken);
  broken = bytes;
  broken.pop_back();
  hurray::Put(directory / "invalid_truncated", broken);
  broken = bytes;
  broken[4096] ^= 0x10;
  hurray::Put(directory / "invalid_data_checksum", broken);
  std::printf("wrote the hrry_reader corpus to %s\n", directory.c_str());
  return 0;
}
