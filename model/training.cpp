#include "model/training.hpp"

namespace osdp {

std::string_view precision_name(Precision precision) {
  return precision == Precision::fp32 ? "fp32" : "mixed";
}

std::string_view optimizer_name(Optimizer optimizer) {
  return optimizer == Optimizer::adam ? "adam" : "sgd";
}

BytesPerParameter bytes_per_parameter(Precision precision, Optimizer optimizer) {
  const double moments = optimizer == Optimizer::adam ? 8.0 : 4.0;
  if (precision == Precision::fp32) return {4.0, 4.0, moments};
  return {2.0, 2.0, 4.0 + moments};  // fp32 master copy lives with the optimizer states
}

double activation_element_bytes(Precision precision) {
  return precision == Precision::fp32 ? 4.0 : 2.0;
}

std::string_view reduce_precision_name(ReducePrecision precision) {
  switch (precision) {
    case ReducePrecision::parameters:
      return "parameters";
    case ReducePrecision::fp32:
      return "fp32";
    case ReducePrecision::fp16:
      return "fp16";
  }
  return "?";
}

double reduce_element_bytes(Precision precision, ReducePrecision reduce) {
  switch (reduce) {
    case ReducePrecision::fp32:
      return 4.0;
    case ReducePrecision::fp16:
      return 2.0;
    case ReducePrecision::parameters:
      break;
  }
  return bytes_per_parameter(precision, Optimizer::adam).parameter;
}

}  // namespace osdp
