#include "hurray/layout.h"

namespace hurray {

std::string_view LayoutName(const Layout& layout) {
  struct Namer {
    std::string_view operator()(const DenseLayout&) const { return "dense"; }
    std::string_view operator()(const CooLayout&) const { return "coo"; }
    std::string_view operator()(const CompressedLayout& compressed) const {
      return compressed.axis == CompressedAxis::kRows ? "csr" : "csc";
    }
    std::string_view operator()(const BlockPagedLayout&) const { return "block_paged"; }
  };
  return std::visit(Namer{}, layout);
}

}  // namespace hurray
