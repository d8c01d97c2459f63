#include "buffer_roles.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "hurray/checked_math.h"

namespace hurray::internal {
namespace {

constexpr std::uint64_t kIndexBytes = 8;  // Every index array is uint64.

std::unexpected<Error> Overflow(std::string_view what) {
  return InvalidArgumentError(fmt::format("{}: byte size overflows 64 bits", what));
}

// Bytes of `count` elements of `type`, or an overflow error naming `what`.
Result<std::uint64_t> ElementBytes(ElementType type, std::uint64_t count, std::string_view what) {
  auto bytes = ByteSizeOf(type, count);
  if (!bytes) return Overflow(what);
  return *bytes;
}

// Bytes of `count` uint64 indices.
Result<std::uint64_t> IndexBytes(std::uint64_t count, std::string_view what) {
  auto bytes = CheckedMul(count, kIndexBytes);
  if (!bytes) return Overflow(what);
  return *bytes;
}

class RoleCollector {
 public:
  explicit RoleCollector(const TensorDescriptor::Parts& parts)
      : parts_(parts), element_count_(CheckedProduct(parts.shape).value_or(0)) {}

  Result<std::vector<BufferPart>> Collect() {
    if (auto status =
            std::visit([this](const auto& layout) { return AddLayout(layout); }, parts_.layout);
        !status) {
      return std::unexpected(status.error());
    }
    if (auto status =
            std::visit([this](const auto& q) { return AddQuantization(q); }, parts_.quantization);
        !status) {
      return std::unexpected(status.error());
    }
    return std::move(roles_);
  }

 private:
  void Add(BufferPart part) { roles_.push_back(std::move(part)); }

  [[nodiscard]] std::size_t rank() const { return parts_.shape.size(); }
  [[nodiscard]] std::string_view type_name() const { return ElementTypeName(parts_.element_type); }

  // ---- Layouts ----

  Status AddLayout(const DenseLayout& dense) {
    const bool strided = !dense.strides.empty();
    auto bytes = strided ? StridedBytes(dense.strides)
                         : ElementBytes(parts_.element_type, element_count_, "dense data");
    if (!bytes) return std::unexpected(bytes.error());
    Add({.index = dense.data_buffer,
         .part = "data",
         .field = "layout.dense.data_buffer",
         .name = "data",
         .element_type = parts_.element_type,
         .shape = parts_.shape,
         .element_strides = dense.strides,
         .byte_size = *bytes,
         .exact = !strided});
    return {};
  }

  // The bytes strided dense data spans: 1 + sum((dim - 1) * stride) elements, or none.
  [[nodiscard]] Result<std::uint64_t> StridedBytes(
      const std::vector<std::uint64_t>& strides) const {
    if (strides.size() != rank()) {
      return InvalidArgumentError(fmt::format(
          "layout.dense.strides has {} entries but the shape has rank {}", strides.size(), rank()));
    }
    if (IsPacked(parts_.element_type)) {
      return InvalidArgumentError(
          fmt::format("layout.dense.strides: element_type {} is packed 4-bit and cannot be strided",
                      type_name()));
    }
    std::uint64_t span = 0;
    if (element_count_ != 0) {
      span = 1;
      for (std::size_t i = 0; i < rank(); ++i) {
        auto step = CheckedMul(parts_.shape[i] - 1, strides[i]);
        auto next = step ? CheckedAdd(span, *step) : std::nullopt;
        if (!next) return Overflow(fmt::format("layout.dense.strides[{}]", i));
        span = *next;
      }
    }
    return ElementBytes(parts_.element_type, span, "strided dense data");
  }

  Status AddLayout(const CooLayout& coo) {
    auto values = ElementBytes(parts_.element_type, coo.nnz, "layout.coo.nnz");
    if (!values) return std::unexpected(values.error());
    auto coordinates = CheckedMul(coo.nnz, rank());
    if (!coordinates) return Overflow("layout.coo.nnz");
    auto indices = IndexBytes(*coordinates, "layout.coo.nnz");
    if (!indices) return std::unexpected(indices.error());
    Add({.index = coo.values_buffer,
         .part = "values",
         .field = "layout.coo.values_buffer",
         .name = "values",
         .element_type = parts_.element_type,
         .shape = {coo.nnz},
         .byte_size = *values});
    Add({.index = coo.indices_buffer,
         .part = "indices",
         .field = "layout.coo.indices_buffer",
         .name = "COO indices",
         .element_type = ElementType::kUint64,
         .shape = {coo.nnz, rank()},
         .byte_size = *indices});
    return {};
  }

  Status AddLayout(const CompressedLayout& compressed) {
    const bool rows = compressed.axis == CompressedAxis::kRows;
    const std::string_view layout_name = rows ? "csr" : "csc";
    if (rank() != 2) {
      return InvalidArgumentError(
          fmt::format("layout.{} needs a rank-2 shape, not rank {}", layout_name, rank()));
    }
    const std::uint64_t primary_dim = parts_.shape[rows ? 0 : 1];
    auto values = ElementBytes(parts_.element_type, compressed.nnz, "nnz");
    if (!values) return std::unexpected(values.error());
    auto offsets = CheckedAdd(primary_dim, 1);
    auto primary = offsets ? IndexBytes(*offsets, "primary index") : Overflow("primary index");
    if (!primary) return std::unexpected(primary.error());
    auto secondary = IndexBytes(compressed.nnz, "nnz");
    if (!secondary) return std::unexpected(secondary.error());
    Add({.index = compressed.values_buffer,
         .part = "values",
         .field = rows ? "layout.csr.values_buffer" : "layout.csc.values_buffer",
         .name = "values",
         .element_type = parts_.element_type,
         .shape = {compressed.nnz},
         .byte_size = *values});
    Add({.index = compressed.primary_index_buffer,
         .part = "indptr",
         .field = rows ? "layout.csr.primary_index_buffer" : "layout.csc.primary_index_buffer",
         .name = rows ? "row offsets" : "column offsets",
         .element_type = ElementType::kUint64,
         .shape = {primary_dim + 1},  // Did not overflow: `primary` succeeded.
         .byte_size = *primary});
    Add({.index = compressed.secondary_index_buffer,
         .part = "indices",
         .field = rows ? "layout.csr.secondary_index_buffer" : "layout.csc.secondary_index_buffer",
         .name = rows ? "column indices" : "row indices",
         .element_type = ElementType::kUint64,
         .shape = {compressed.nnz},
         .byte_size = *secondary});
    return {};
  }

  Status AddLayout(const BlockPagedLayout& paged) {
    if (rank() == 0) {
      return InvalidArgumentError("layout.block_paged needs a shape of rank 1 or more");
    }
    if (paged.block_size == 0) {
      return InvalidArgumentError("layout.block_paged.block_size 0 must be at least 1");
    }
    const std::uint64_t blocks = CeilDiv(parts_.shape[0], paged.block_size);
    if (blocks > 0 && paged.num_pages == 0) {
      return InvalidArgumentError(fmt::format(
          "layout.block_paged.num_pages 0: the tensor has {} blocks, so it needs at least one page",
          blocks));
    }
    auto row_elements = CheckedProduct(std::span(parts_.shape).subspan(1));
    auto page_elements = row_elements ? CheckedMul(*row_elements, paged.block_size) : std::nullopt;
    auto page_bits = page_elements
                         ? CheckedMul(*page_elements, ElementBitWidth(parts_.element_type))
                         : std::nullopt;
    if (!page_bits) return Overflow("layout.block_paged page");
    if (*page_bits % 8 != 0) {
      return InvalidArgumentError(
          fmt::format("layout.block_paged: a page of {} {} elements does not end on a byte",
                      *page_elements, type_name()));
    }
    auto data = CheckedMul(*page_bits / 8, paged.num_pages);
    if (!data) return Overflow("layout.block_paged.num_pages");
    auto table = IndexBytes(blocks, "layout.block_paged page table");
    if (!table) return std::unexpected(table.error());
    std::vector<std::uint64_t> pages{paged.num_pages, paged.block_size};
    pages.insert(pages.end(), parts_.shape.begin() + 1, parts_.shape.end());
    Add({.index = paged.data_buffer,
         .part = "data",
         .field = "layout.block_paged.data_buffer",
         .name = "pages",
         .element_type = parts_.element_type,
         .shape = std::move(pages),
         .byte_size = *data});
    Add({.index = paged.page_table_buffer,
         .part = "page_table",
         .field = "layout.block_paged.page_table_buffer",
         .name = "page table",
         .element_type = ElementType::kUint64,
         .shape = {blocks},
         .byte_size = *table});
    return {};
  }

  // ---- Quantizations ----

  Status AddQuantization(const NoQuantization&) {
    if (parts_.element_type == ElementType::kNf4) {
      return InvalidArgumentError(
          "element_type nf4 holds codes, not values: it needs nf4 quantization");
    }
    return {};
  }

  // Affine quantization stores integers or 8-bit floats.
  [[nodiscard]] Status CheckAffineStorage(std::string_view field) const {
    const ElementType type = parts_.element_type;
    if (IsInteger(type) || type == ElementType::kFloat8E4m3fn || type == ElementType::kFloat8E5m2) {
      return {};
    }
    return InvalidArgumentError(
        fmt::format("{} needs an integer or float8 element_type, not {}", field, type_name()));
  }

  Status AddQuantization(const PerTensorAffine& affine) {
    if (auto status = CheckAffineStorage("quantization.per_tensor_affine"); !status) {
      return status;
    }
    if (!std::isfinite(affine.scale) || affine.scale == 0.0) {
      return InvalidArgumentError(fmt::format(
          "quantization.per_tensor_affine.scale {:g} must be finite and non-zero", affine.scale));
    }
    return {};
  }

  Status AddQuantization(const PerChannelAffine& affine) {
    if (auto status = CheckAffineStorage("quantization.per_channel_affine"); !status) {
      return status;
    }
    if (affine.axis >= rank()) {
      return InvalidArgumentError(
          fmt::format("quantization.per_channel_affine.axis {} is out of range for rank {}",
                      affine.axis, rank()));
    }
    if (!IsWideFloat(affine.scale_type)) {
      return InvalidArgumentError(fmt::format(
          "quantization.per_channel_affine.scale_type {} is not float16, bfloat16, float32 or "
          "float64",
          ElementTypeName(affine.scale_type)));
    }
    const std::uint64_t channels = parts_.shape[affine.axis];
    auto scales = ElementBytes(affine.scale_type, channels, "per-channel scales");
    if (!scales) return std::unexpected(scales.error());
    Add({.index = affine.scale_buffer,
         .part = "scales",
         .field = "quantization.per_channel_affine.scale_buffer",
         .name = "scales",
         .element_type = affine.scale_type,
         .shape = {channels},
         .byte_size = *scales});
    if (affine.zero_points) {
      const ElementType type = affine.zero_points->type;
      if (IsPacked(type) || !(IsInteger(type) || IsWideFloat(type))) {
        return InvalidArgumentError(fmt::format(
            "quantization.per_channel_affine.zero_point_type {} is not an integer of 8 to 64 "
            "bits or a float of 16 to 64 bits",
            ElementTypeName(type)));
      }
      auto zero_points = ElementBytes(type, channels, "per-channel zero points");
      if (!zero_points) return std::unexpected(zero_points.error());
      Add({.index = affine.zero_points->buffer,
           .part = "zero_points",
           .field = "quantization.per_channel_affine.zero_point_buffer",
           .name = "zero points",
           .element_type = type,
           .shape = {channels},
           .byte_size = *zero_points});
    }
    return {};
  }

  [[nodiscard]] Status RequireDense(std::string_view field) const {
    if (!std::holds_alternative<DenseLayout>(parts_.layout)) {
      return InvalidArgumentError(
          fmt::format("{} needs the dense layout, not {}", field, LayoutName(parts_.layout)));
    }
    return {};
  }

  Status AddQuantization(const Nf4Quantization& nf4) {
    if (parts_.element_type != ElementType::kNf4) {
      return InvalidArgumentError(
          fmt::format("quantization.nf4 needs element_type nf4, not {}", type_name()));
    }
    if (auto status = RequireDense("quantization.nf4"); !status) return status;
    if (nf4.block_size == 0) {
      return InvalidArgumentError("quantization.nf4.block_size 0 must be at least 1");
    }
    const ElementType type = nf4.scale_type;
    if (type != ElementType::kFloat16 && type != ElementType::kBfloat16 &&
        type != ElementType::kFloat32) {
      return InvalidArgumentError(
          fmt::format("quantization.nf4.scale_type {} is not float16, bfloat16 or float32",
                      ElementTypeName(type)));
    }
    const std::uint64_t blocks = CeilDiv(element_count_, nf4.block_size);
    auto scales = ElementBytes(type, blocks, "nf4 scales");
    if (!scales) return std::unexpected(scales.error());
    Add({.index = nf4.scale_buffer,
         .part = "scales",
         .field = "quantization.nf4.scale_buffer",
         .name = "scales",
         .element_type = type,
         .shape = {blocks},
         .byte_size = *scales});
    return {};
  }

  Status AddQuantization(const MxfpQuantization& mxfp) {
    const ElementType type = parts_.element_type;
    if (type != ElementType::kMxfp4 && type != ElementType::kFloat8E4m3fn &&
        type != ElementType::kFloat8E5m2) {
      return InvalidArgumentError(fmt::format(
          "quantization.mxfp needs element_type mxfp4, float8_e4m3fn or float8_e5m2, not {}",
          type_name()));
    }
    if (auto status = RequireDense("quantization.mxfp"); !status) return status;
    if (rank() == 0) {
      return InvalidArgumentError("quantization.mxfp needs a shape of rank 1 or more");
    }
    if (mxfp.block_size == 0) {
      return InvalidArgumentError("quantization.mxfp.block_size 0 must be at least 1");
    }
    const std::uint64_t row_blocks = CeilDiv(parts_.shape.back(), mxfp.block_size);
    auto rows = CheckedProduct(std::span(parts_.shape).first(rank() - 1));
    auto count = rows ? CheckedMul(*rows, row_blocks) : std::nullopt;
    if (!count) return Overflow("mxfp scales");
    std::vector<std::uint64_t> shape(parts_.shape.begin(), parts_.shape.end() - 1);
    shape.push_back(row_blocks);
    Add({.index = mxfp.scale_buffer,
         .part = "scales",
         .field = "quantization.mxfp.scale_buffer",
         .name = "scales",
         .element_type = ElementType::kFloat8E8m0,  // One byte each.
         .shape = std::move(shape),
         .byte_size = *count});
    return {};
  }

  const TensorDescriptor::Parts& parts_;
  const std::uint64_t element_count_;
  std::vector<BufferPart> roles_;
};

}  // namespace

Result<std::vector<BufferPart>> BufferPartsOf(const TensorDescriptor::Parts& parts) {
  return RoleCollector(parts).Collect();
}

std::string DescribeQuantization(const Quantization& quantization) {
  struct Describer {
    std::string operator()(const NoQuantization&) const { return "none"; }
    std::string operator()(const PerTensorAffine& q) const {
      return fmt::format("per_tensor_affine scale {:g}, zero point {}", q.scale, q.zero_point);
    }
    std::string operator()(const PerChannelAffine& q) const {
      std::string text = fmt::format("per_channel_affine axis {}, scales in buffer {} ({})", q.axis,
                                     q.scale_buffer, ElementTypeName(q.scale_type));
      if (q.zero_points) {
        text += fmt::format(", zero points in buffer {} ({})", q.zero_points->buffer,
                            ElementTypeName(q.zero_points->type));
      }
      return text;
    }
    std::string operator()(const Nf4Quantization& q) const {
      return fmt::format("nf4 block {}, scales in buffer {} ({})", q.block_size, q.scale_buffer,
                         ElementTypeName(q.scale_type));
    }
    std::string operator()(const MxfpQuantization& q) const {
      return fmt::format("mxfp block {}, e8m0 scales in buffer {}", q.block_size, q.scale_buffer);
    }
  };
  return std::visit(Describer{}, quantization);
}

}  // namespace hurray::internal
