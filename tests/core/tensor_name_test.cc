// Tensor names: how messages show one (ShownName). Their rule, ValidateTensorName, is tested
// with the registry that applies it (tests/daemon/registry/registry_test.cc).
#include "hurray/tensor_name.h"

#include <gtest/gtest.h>

#include <string>

namespace hurray {
namespace {

TEST(ShownNameTest, ShowsAValidNameWhole) {
  EXPECT_EQ(ShownName("llama-3/layers.0.mlp/up_proj"), "llama-3/layers.0.mlp/up_proj");
  EXPECT_EQ(ShownName(""), "");
}

TEST(ShownNameTest, CutsALongNameAndSaysSo) {
  const std::string at_limit(kShownNameBytes, 'a');
  EXPECT_EQ(ShownName(at_limit), at_limit);
  EXPECT_EQ(ShownName(at_limit + "b"), at_limit + "...");
}

TEST(ShownNameTest, ShowsBytesOutsidePrintableAsciiAsQuestionMarks) {
  EXPECT_EQ(ShownName(std::string("ns/a\0b\n\x7f\xc3\xa9", 10)), "ns/a?b????");
}

}  // namespace
}  // namespace hurray
