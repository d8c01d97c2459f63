// SharedMapping over a real memfd: what one process writes through a mapping, another
// mapping of the same file reads; an offset maps from there; a move hands the mapping over;
// a failed mmap names the file.
#include "hurray/ipc/shared_mapping.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <utility>

#include "hurray/ipc/unique_fd.h"
#include "testing/status_matchers.h"

namespace hurray {
namespace {

// A memfd of `pages` pages.
UniqueFd MemoryFile(std::size_t pages) {
  UniqueFd fd(::memfd_create("hurray-shared-mapping-test", MFD_CLOEXEC));
  EXPECT_TRUE(fd);
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(pages * ::getpagesize())), 0);
  return fd;
}

TEST(SharedMappingTest, TwoMappingsOfOneFileShareItsBytes) {
  const std::size_t page = ::getpagesize();
  const UniqueFd fd = MemoryFile(2);
  ASSERT_OK_AND_ASSIGN(SharedMapping writer,
                       SharedMapping::Map(fd.get(), 2 * page, PROT_READ | PROT_WRITE, "memfd"));
  ASSERT_OK_AND_ASSIGN(SharedMapping reader,
                       SharedMapping::Map(fd.get(), page, PROT_READ, "memfd", page));
  EXPECT_EQ(writer.size(), 2 * page);
  EXPECT_EQ(reader.size(), page);
  std::memcpy(writer.bytes() + page, "second page", 12);
  EXPECT_STREQ(reinterpret_cast<const char*>(reader.bytes()), "second page");
}

TEST(SharedMappingTest, AMoveHandsTheMappingOver) {
  const UniqueFd fd = MemoryFile(1);
  ASSERT_OK_AND_ASSIGN(SharedMapping first,
                       SharedMapping::Map(fd.get(), ::getpagesize(), PROT_READ, "memfd"));
  void* const data = first.data();
  SharedMapping second = std::move(first);
  EXPECT_EQ(second.data(), data);
  EXPECT_EQ(first.data(), nullptr);  // NOLINT(bugprone-use-after-move): moved from, on purpose.
  EXPECT_EQ(first.size(), 0u);       // NOLINT(bugprone-use-after-move)
  ASSERT_OK_AND_ASSIGN(SharedMapping third,
                       SharedMapping::Map(fd.get(), ::getpagesize(), PROT_READ, "memfd"));
  third = std::move(second);  // Unmaps what `third` held.
  EXPECT_EQ(third.data(), data);
}

TEST(SharedMappingTest, AFailedMapNamesTheFile) {
  EXPECT_ERROR(SharedMapping::Map(-1, 4096, PROT_READ, "segment 7"), StatusCode::kInvalidArgument,
               {"mmap segment 7"});
  const UniqueFd fd = MemoryFile(1);
  // An offset off the page grid: EINVAL, which the errno table leaves INTERNAL.
  EXPECT_ERROR(SharedMapping::Map(fd.get(), 4096, PROT_READ, "segment 8", 1), StatusCode::kInternal,
               {"mmap segment 8", "Invalid argument"});
}

}  // namespace
}  // namespace hurray
