#include "hurray/file_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <random>
#include <unordered_set>
#include <utility>

#include "file_format.h"
#include "hurray/checked_math.h"
#include "hurray/descriptor_codec.h"
#include "hurray/errno_error.h"
#include "hurray/v1/file.pb.h"

namespace hurray {

struct FileWriter::State {
  std::string path;
  std::string temp_path;
  int fd = -1;
  std::uint64_t end = internal::kFileHeaderBytes;  // First byte past what is written.
  std::uint64_t data_bytes = 0;
  v1::FileIndex index;
  std::unordered_set<std::string> names;
  bool finished = false;  // Finish was called (whatever its outcome).
  bool renamed = false;   // The file is in place: the temporary name is gone.

  State() = default;
  State(const State&) = delete;
  State& operator=(const State&) = delete;
  ~State() {
    if (fd >= 0) ::close(fd);
    if (!renamed && !temp_path.empty()) ::unlink(temp_path.c_str());
  }
};

namespace {

// Writes all of `bytes` at `offset`, retrying short writes and EINTR.
Status WriteAt(int fd, const std::string& path, std::uint64_t offset,
               std::span<const std::byte> bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t put = ::pwrite(fd, bytes.data() + written, bytes.size() - written,
                                 static_cast<off_t>(offset + written));
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return ErrnoFailure("pwrite", path, errno);
    written += static_cast<std::size_t>(put);
  }
  return {};
}

// A new file beside `path`, named "<path>.tmp-<random>", mode 0644 less the umask.
Result<std::pair<std::string, int>> CreateTemporary(const std::string& path) {
  std::random_device random;
  constexpr int kAttempts = 16;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::string temp_path = fmt::format("{}.tmp-{:08x}{:08x}", path, random(), random());
    const int fd = ::open(temp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) return std::pair{std::move(temp_path), fd};
    if (errno != EEXIST) return ErrnoFailure("open(O_CREAT)", temp_path, errno);
  }
  return AlreadyExistsError(
      fmt::format("{}: no free temporary name after {} attempts", path, kAttempts));
}

Status SyncDirectoryOf(const std::string& path) {
  std::string directory = std::filesystem::path(path).parent_path().string();
  if (directory.empty()) directory = ".";
  const int fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoFailure("open(O_DIRECTORY)", directory, errno);
  const bool synced = ::fsync(fd) == 0;
  const int error_number = errno;
  ::close(fd);
  if (!synced) return ErrnoFailure("fsync", directory, error_number);
  return {};
}

// Checks a tensor's arguments against the writer's rules; nothing is written.
Status CheckTensor(std::string_view name, const TensorDescriptor& descriptor,
                   std::span<const std::span<const std::byte>> buffers,
                   const std::unordered_set<std::string>& names) {
  HURRAY_RETURN_IF_ERROR(internal::CheckFileTensorName(name));
  if (names.contains(std::string(name))) {
    return AlreadyExistsError(fmt::format("tensor {}: the name is already in the file", name));
  }
  const auto& table = descriptor.buffers();
  if (buffers.size() != table.size()) {
    return InvalidArgumentError(
        fmt::format("tensor {}: {} buffers given, but the descriptor's buffer table has {}", name,
                    buffers.size(), table.size()));
  }
  for (std::size_t i = 0; i < table.size(); ++i) {
    if (buffers[i].size() != table[i].byte_size()) {
      return InvalidArgumentError(
          fmt::format("tensor {}: buffers[{}] holds {} bytes, but the descriptor's byte_size is {}",
                      name, i, buffers[i].size(), table[i].byte_size()));
    }
  }
  return {};
}

}  // namespace

FileWriter::FileWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
FileWriter::FileWriter(FileWriter&&) noexcept = default;
FileWriter& FileWriter::operator=(FileWriter&&) noexcept = default;
FileWriter::~FileWriter() = default;

Result<FileWriter> FileWriter::Create(const std::string& path) {
  HURRAY_ASSIGN_OR_RETURN(auto temporary, CreateTemporary(path));
  auto state = std::make_unique<State>();
  state->path = path;
  state->temp_path = std::move(temporary.first);
  state->fd = temporary.second;
  return FileWriter(std::move(state));
}

Status FileWriter::WriteTensor(std::string_view name, const TensorDescriptor& descriptor,
                               std::span<const std::span<const std::byte>> buffers) {
  if (state_->finished) {
    return FailedPreconditionError(fmt::format("{}: the writer is finished", state_->path));
  }
  HURRAY_RETURN_IF_ERROR(CheckTensor(name, descriptor, buffers, state_->names));
  v1::FileTensor tensor;
  tensor.set_name(std::string(name));
  *tensor.mutable_tensor_descriptor() = DescriptorToProto(descriptor);
  std::uint64_t end = state_->end;
  for (std::span<const std::byte> bytes : buffers) {
    v1::FileBuffer* entry = tensor.add_buffers();
    entry->set_byte_size(bytes.size());
    entry->set_xxh3_64(internal::FileChecksum(bytes));
    if (bytes.empty()) continue;
    auto offset = internal::CheckedRoundUp(end, kFileBufferAlignment);
    if (!offset || !internal::CheckedAdd(*offset, bytes.size())) {
      return ResourceExhaustedError(
          fmt::format("{}: tensor {} does not fit below 2^64 bytes", state_->path, name));
    }
    HURRAY_RETURN_IF_ERROR(WriteAt(state_->fd, state_->temp_path, *offset, bytes));
    entry->set_offset(*offset);
    end = *offset + bytes.size();
  }
  // Only now is the tensor part of the file: a failed write above leaves nothing behind
  // that the index refers to.
  state_->end = end;
  for (std::span<const std::byte> bytes : buffers) state_->data_bytes += bytes.size();
  state_->names.emplace(name);
  *state_->index.add_tensors() = std::move(tensor);
  return {};
}

std::size_t FileWriter::tensor_count() const {
  return static_cast<std::size_t>(state_->index.tensors_size());
}

std::uint64_t FileWriter::data_bytes() const { return state_->data_bytes; }

Status FileWriter::Finish() {
  State& state = *state_;
  if (state.finished) {
    return FailedPreconditionError(fmt::format("{}: the writer is finished", state.path));
  }
  state.finished = true;
  const std::string index = state.index.SerializeAsString();
  const internal::FileHeader header{
      .index_offset = state.end,
      .index_size = index.size(),
      .index_checksum = internal::FileChecksum(std::as_bytes(std::span(index)))};
  HURRAY_RETURN_IF_ERROR(
      WriteAt(state.fd, state.temp_path, state.end, std::as_bytes(std::span(index))));
  HURRAY_RETURN_IF_ERROR(WriteAt(state.fd, state.temp_path, 0, internal::EncodeFileHeader(header)));
  // A failed write may have left bytes past the index; the index must end the file.
  if (::ftruncate(state.fd, static_cast<off_t>(state.end + index.size())) != 0) {
    return ErrnoFailure("ftruncate", state.temp_path, errno);
  }
  if (::fsync(state.fd) != 0) return ErrnoFailure("fsync", state.temp_path, errno);
  const int fd = std::exchange(state.fd, -1);
  if (::close(fd) != 0) return ErrnoFailure("close", state.temp_path, errno);
  if (std::rename(state.temp_path.c_str(), state.path.c_str()) != 0) {
    return std::unexpected(
        ErrnoError(fmt::format("rename {} to", state.temp_path), state.path, errno));
  }
  state.renamed = true;
  return SyncDirectoryOf(state.path);
}

}  // namespace hurray
