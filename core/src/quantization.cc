#include "hurray/quantization.h"

namespace hurray {

std::string_view QuantizationName(const Quantization& quantization) {
  struct Namer {
    std::string_view operator()(const NoQuantization&) const { return "none"; }
    std::string_view operator()(const PerTensorAffine&) const { return "per_tensor_affine"; }
    std::string_view operator()(const PerChannelAffine&) const { return "per_channel_affine"; }
    std::string_view operator()(const Nf4Quantization&) const { return "nf4"; }
    std::string_view operator()(const MxfpQuantization&) const { return "mxfp"; }
  };
  return std::visit(Namer{}, quantization);
}

}  // namespace hurray
