#include "codegen/gemm/gemm_candidate.h"

namespace anvil::codegen::gemm {

const char* gemm_op_name(GemmOp op) {
  switch (op) {
    case GemmOp::kMm: return "mm";
    case GemmOp::kAddmm: return "addmm";
    case GemmOp::kBmm: return "bmm";
    case GemmOp::kIntMm: return "int_mm";
    case GemmOp::kMixedMm: return "mixed_mm";
  }
  return "?";
}

const char* gemm_backend_name(GemmBackend b) {
  switch (b) {
    case GemmBackend::kOwn: return "own";
    case GemmBackend::kOpenBlas: return "openblas";
    case GemmBackend::kOneDnn: return "onednn";
    case GemmBackend::kCublasLt: return "cublaslt";
    case GemmBackend::kCutlass: return "cutlass";
  }
  return "?";
}

}  // namespace anvil::codegen::gemm
