// ReadFileRanges as a plain pread loop on the calling thread. Placeholder of the hrry
// branch only, so FileReader builds before the parallel implementation lands; the merge
// keeps that one.
#include "hurray/file_reads.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

#include "hurray/errno_error.h"

namespace hurray {

Status ReadFileRanges(int fd, std::string_view path, std::span<const FileRange> ranges,
                      const FileReadOptions& options) {
  std::uint64_t done = 0;
  for (const FileRange& range : ranges) {
    std::size_t filled = 0;
    while (filled < range.destination.size()) {
      const std::uint64_t offset = range.file_offset + filled;
      const ssize_t got = ::pread(fd, range.destination.data() + filled,
                                  range.destination.size() - filled, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) return std::unexpected(ErrnoError("pread", path, errno));
      if (got == 0) {
        return DataLossError(fmt::format("{}: unexpected end of file at byte {}", path, offset));
      }
      filled += static_cast<std::size_t>(got);
    }
    done += filled;
  }
  if (options.progress) options.progress(done);
  return {};
}

}  // namespace hurray
