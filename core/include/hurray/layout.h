// How a tensor's elements are stored across its buffers. Plain values; thread-safe.
//
// Every buffer index here is a position in the descriptor's buffer table (the positional
// rule); TensorDescriptor::Create checks that each resolves and has a consistent size.
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "hurray/export.h"

namespace hurray {

// Dense storage: all elements in one buffer.
struct DenseLayout {
  // Buffer holding the elements.
  std::uint32_t data_buffer = 0;
  // Stride of each dimension in elements, one per dimension; empty means row-major and
  // contiguous. Not allowed for 4-bit element types.
  std::vector<std::uint64_t> strides;

  friend bool operator==(const DenseLayout&, const DenseLayout&) = default;
};

// Sparse coordinate (COO) storage: nnz values and a uint64 [nnz, rank] coordinate array.
struct CooLayout {
  std::uint32_t values_buffer = 0;
  std::uint32_t indices_buffer = 1;
  std::uint64_t nnz = 0;

  friend bool operator==(const CooLayout&, const CooLayout&) = default;
};

// Which dimension a compressed sparse layout compresses.
enum class CompressedAxis : std::uint8_t {
  kRows,     // CSR: primary index = row offsets (shape[0] + 1 entries).
  kColumns,  // CSC: primary index = column offsets (shape[1] + 1 entries).
};

// Compressed sparse storage (CSR or CSC) of a rank-2 tensor. Index arrays are uint64.
struct CompressedLayout {
  CompressedAxis axis = CompressedAxis::kRows;
  std::uint32_t values_buffer = 0;
  std::uint32_t primary_index_buffer = 1;
  std::uint32_t secondary_index_buffer = 2;
  std::uint64_t nnz = 0;

  friend bool operator==(const CompressedLayout&, const CompressedLayout&) = default;
};

// Block-paged storage: dimension 0 cut into blocks of block_size rows, each stored in one
// page of the data buffer; a uint64 page table maps logical block -> page.
struct BlockPagedLayout {
  std::uint32_t data_buffer = 0;
  std::uint32_t page_table_buffer = 1;
  std::uint64_t block_size = 1;
  std::uint64_t num_pages = 0;

  friend bool operator==(const BlockPagedLayout&, const BlockPagedLayout&) = default;
};

using Layout = std::variant<DenseLayout, CooLayout, CompressedLayout, BlockPagedLayout>;

// "dense", "coo", "csr", "csc" or "block_paged".
[[nodiscard]] HURRAY_CXX_EXPORT std::string_view LayoutName(const Layout& layout);

}  // namespace hurray
