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

}  // namespace osdp
