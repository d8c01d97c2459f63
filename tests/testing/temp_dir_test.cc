// TempDir: a fresh directory, removed with its contents, kept on request, moved safely.
#include "testing/temp_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>

#include "testing/status_matchers.h"

namespace hurray::testing {
namespace {

TEST(TempDirTest, IsFreshAndIsRemovedRecursively) {
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(TempDir directory, TempDir::Create("temp-dir-test"));
    path = directory.path();
    EXPECT_TRUE(path.starts_with("/tmp/temp-dir-test-")) << path;
    EXPECT_TRUE(std::filesystem::is_directory(path));
    EXPECT_TRUE(std::filesystem::is_empty(path));
    EXPECT_EQ(directory.Path("a"), path + "/a");
    std::filesystem::create_directory(directory.Path("sub"));
    std::ofstream(directory.Path("sub/file")) << "bytes";
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TempDirTest, KeptDirectoryStays) {
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(TempDir directory, TempDir::Create("temp-dir-test"));
    path = directory.path();
    directory.Keep();
  }
  EXPECT_TRUE(std::filesystem::is_directory(path));
  std::filesystem::remove_all(path);
}

TEST(TempDirTest, MovedDirectoryIsRemovedOnceByItsLastOwner) {
  std::optional<TempDir> last;
  std::string path;
  {
    ASSERT_OK_AND_ASSIGN(TempDir first, TempDir::Create("temp-dir-test"));
    path = first.path();
    last.emplace(std::move(first));
  }
  EXPECT_TRUE(std::filesystem::is_directory(path));
  last.reset();
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(TempDirTest, UnmakeablePrefixIsInternal) {
  EXPECT_ERROR(TempDir::Create("no/such/parent"), StatusCode::kInternal, {"mkdtemp"});
}

}  // namespace
}  // namespace hurray::testing
