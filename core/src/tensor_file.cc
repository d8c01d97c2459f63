#include "hurray/tensor_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <set>
#include <string_view>
#include <utility>

#include "hurray/errno_error.h"
#include "hurray/file_reader.h"
#include "hurray/safetensors.h"
#include "hurray/tensor_name.h"

namespace hurray {
namespace {

constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
constexpr std::string_view kHrrySuffix = ".hrry";

// A file open for reading; closes it on destruction. Move-only.
class OpenFile {
 public:
  static Result<OpenFile> Open(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoFailure("open", path, errno);
    return OpenFile(path, fd);
  }
  OpenFile(OpenFile&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}
  OpenFile& operator=(OpenFile&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      path_ = std::move(other.path_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  OpenFile(const OpenFile&) = delete;
  OpenFile& operator=(const OpenFile&) = delete;
  ~OpenFile() {
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int fd() const { return fd_; }

 private:
  OpenFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  std::string path_;
  int fd_ = -1;
};

// Where a safetensors tensor's bytes lie: which shard, and the range in it.
struct Placement {
  std::size_t shard = 0;
  std::uint64_t file_offset = 0;
};

// The whole of a small file (an index's JSON), at most kMaxSafetensorsHeaderBytes.
Result<std::string> ReadSmallFile(const OpenFile& file) {
  struct stat status{};
  if (::fstat(file.fd(), &status) != 0) {
    return ErrnoFailure("fstat", file.path(), errno);
  }
  const auto size = static_cast<std::uint64_t>(status.st_size);
  if (size > kMaxSafetensorsHeaderBytes) {
    return InvalidArgumentError(fmt::format("{}: the index is {} bytes, above the limit {}",
                                            file.path(), size, kMaxSafetensorsHeaderBytes));
  }
  std::string text(static_cast<std::size_t>(size), '\0');
  const FileRange range{.file_offset = 0, .destination = std::as_writable_bytes(std::span(text))};
  HURRAY_RETURN_IF_ERROR(
      ReadFileRanges(file.fd(), file.path(), std::span(&range, 1), {.parallelism = 1}));
  return text;
}

// The directory part of `path`, with its trailing '/' ("" for a bare file name).
std::string DirectoryOf(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

}  // namespace

struct TensorFile::State {
  Format format = Format::kSafetensors;
  std::vector<Tensor> tensors;
  std::uint64_t total_bytes = 0;
  // Safetensors (one file or the shards, in index order) and each tensor's placement.
  std::vector<OpenFile> shards;
  std::vector<Placement> placements;
  // .hrry.
  std::unique_ptr<FileReader> hrry;

  // Appends a shard's tensors; `weight_map` (for an index) is checked against the shard.
  Status AddShard(OpenFile file, const std::map<std::string, std::string>* weight_map,
                  std::string_view shard_name, std::set<std::string, std::less<>>& seen);
  [[nodiscard]] Status ReadSafetensors(
      std::span<const std::vector<std::span<std::byte>>> destinations,
      const FileReadOptions& options) const;
  [[nodiscard]] Status ReadHrry(std::span<const std::vector<std::span<std::byte>>> destinations,
                                const FileReadOptions& options) const;
};

Status TensorFile::State::AddShard(OpenFile file,
                                   const std::map<std::string, std::string>* weight_map,
                                   std::string_view shard_name,
                                   std::set<std::string, std::less<>>& seen) {
  HURRAY_ASSIGN_OR_RETURN(SafetensorsHeader header, ReadSafetensorsHeader(file.fd(), file.path()));
  const std::size_t shard = shards.size();
  for (SafetensorsTensor& tensor : header.tensors) {
    if (weight_map != nullptr) {
      const auto entry = weight_map->find(tensor.name);
      if (entry == weight_map->end()) {
        return InvalidArgumentError(fmt::format(
            R"({}: tensor "{}" is not in the index's weight_map)", file.path(), tensor.name));
      }
      if (entry->second != shard_name) {
        return InvalidArgumentError(
            fmt::format(R"({}: tensor "{}" is in this shard but weight_map puts it in "{}")",
                        file.path(), tensor.name, entry->second));
      }
    }
    // Unique: a shard's names are JSON keys, and weight_map puts each name in one shard.
    seen.insert(tensor.name);
    placements.push_back({.shard = shard, .file_offset = tensor.file_offset});
    total_bytes += tensor.byte_size;
    tensors.push_back({.name = std::move(tensor.name), .descriptor = std::move(tensor.descriptor)});
  }
  shards.push_back(std::move(file));
  return {};
}

Result<TensorFile> TensorFile::Open(const std::string& path) {
  auto state = std::make_unique<State>();
  if (path.ends_with(kHrrySuffix)) {
    state->format = Format::kHrry;
    HURRAY_ASSIGN_OR_RETURN(FileReader reader, FileReader::Open(path));
    state->hrry = std::make_unique<FileReader>(std::move(reader));
    for (const FileTensorEntry& entry : state->hrry->tensors()) {
      for (const FileBufferEntry& buffer : entry.buffers) state->total_bytes += buffer.byte_size;
      state->tensors.push_back({.name = entry.name, .descriptor = entry.descriptor});
    }
    return TensorFile(std::move(state));
  }
  std::set<std::string, std::less<>> seen;
  HURRAY_ASSIGN_OR_RETURN(OpenFile file, OpenFile::Open(path));
  if (!path.ends_with(kIndexSuffix)) {
    state->format = Format::kSafetensors;
    HURRAY_RETURN_IF_ERROR(state->AddShard(std::move(file), nullptr, {}, seen));
    return TensorFile(std::move(state));
  }
  state->format = Format::kSafetensorsIndex;
  HURRAY_ASSIGN_OR_RETURN(const std::string json, ReadSmallFile(file));
  auto index = ParseSafetensorsIndex(json);
  if (!index) return std::unexpected(index.error().WithContext(path));
  const std::string directory = DirectoryOf(path);
  for (const std::string& shard : index->shards) {
    HURRAY_ASSIGN_OR_RETURN(OpenFile shard_file, OpenFile::Open(directory + shard));
    HURRAY_RETURN_IF_ERROR(state->AddShard(std::move(shard_file), &index->weight_map, shard, seen));
  }
  for (const auto& [name, shard] : index->weight_map) {
    if (!seen.contains(name)) {
      return InvalidArgumentError(fmt::format(
          R"({}: weight_map entry "{}": shard "{}" does not hold it)", path, name, shard));
    }
  }
  return TensorFile(std::move(state));
}

TensorFile::TensorFile(std::unique_ptr<State> state) : state_(std::move(state)) {}
TensorFile::TensorFile(TensorFile&&) noexcept = default;
TensorFile& TensorFile::operator=(TensorFile&&) noexcept = default;
TensorFile::~TensorFile() = default;

TensorFile::Format TensorFile::format() const { return state_->format; }
std::span<const TensorFile::Tensor> TensorFile::tensors() const { return state_->tensors; }
std::uint64_t TensorFile::total_bytes() const { return state_->total_bytes; }

Result<std::vector<std::string>> TensorFile::PrefixedNames(std::string_view prefix) const {
  std::vector<std::string> names;
  names.reserve(state_->tensors.size());
  for (const Tensor& tensor : state_->tensors) {
    std::string name = fmt::format("{}{}", prefix, tensor.name);
    HURRAY_RETURN_IF_ERROR(ValidateTensorName(
        name, fmt::format(R"(tensor "{}" under prefix "{}": name)", tensor.name, prefix)));
    names.push_back(std::move(name));
  }
  return names;
}

Status TensorFile::Read(std::span<const std::vector<std::span<std::byte>>> destinations,
                        const FileReadOptions& options) const {
  const std::vector<Tensor>& tensors = state_->tensors;
  if (destinations.size() != tensors.size()) {
    return InvalidArgumentError(fmt::format("destinations: {} entries for the file's {} tensors",
                                            destinations.size(), tensors.size()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::vector<BufferHandle>& table = tensors[i].descriptor.buffers();
    if (destinations[i].size() != table.size()) {
      return InvalidArgumentError(
          fmt::format("destinations[{}] (tensor \"{}\"): {} buffers for the descriptor's {}", i,
                      tensors[i].name, destinations[i].size(), table.size()));
    }
    for (std::size_t j = 0; j < table.size(); ++j) {
      if (destinations[i][j].size() != table[j].byte_size()) {
        return InvalidArgumentError(fmt::format(
            "destinations[{}] (tensor \"{}\") buffer {}: {} bytes where the buffer has {}", i,
            tensors[i].name, j, destinations[i][j].size(), table[j].byte_size()));
      }
    }
  }
  return state_->format == Format::kHrry ? state_->ReadHrry(destinations, options)
                                         : state_->ReadSafetensors(destinations, options);
}

Status TensorFile::State::ReadSafetensors(
    std::span<const std::vector<std::span<std::byte>>> destinations,
    const FileReadOptions& options) const {
  std::vector<std::vector<FileRange>> ranges(shards.size());
  for (std::size_t i = 0; i < placements.size(); ++i) {
    ranges[placements[i].shard].push_back(
        {.file_offset = placements[i].file_offset, .destination = destinations[i][0]});
  }
  std::uint64_t shards_done = 0;  // Bytes of the shards already read.
  for (std::size_t shard = 0; shard < shards.size(); ++shard) {
    FileReadOptions shard_options = options;
    if (options.progress) {
      shard_options.progress = [&](std::uint64_t done) { options.progress(shards_done + done); };
    }
    HURRAY_RETURN_IF_ERROR(
        ReadFileRanges(shards[shard].fd(), shards[shard].path(), ranges[shard], shard_options));
    for (const FileRange& range : ranges[shard]) shards_done += range.destination.size();
  }
  if (shards.empty() && options.progress) options.progress(0);
  return {};
}

Status TensorFile::State::ReadHrry(std::span<const std::vector<std::span<std::byte>>> destinations,
                                   const FileReadOptions& options) const {
  std::vector<FileReader::BufferDestination> buffers;
  for (std::size_t i = 0; i < destinations.size(); ++i) {
    for (std::size_t j = 0; j < destinations[i].size(); ++j) {
      buffers.push_back({.tensor = i, .buffer = j, .destination = destinations[i][j]});
    }
  }
  return hrry->ReadBuffers(buffers, options);
}

}  // namespace hurray
