// aten._scaled_mm on the CUDA target: cuBLASLt's FP8 GEMM through the device backend
// (api->device->gemm_ex with AnvilGemmArgs' float8 fields, device ABI 6). The lowering
// (passes/lower_scaled_mm.cpp) gives self row-major and mat2 column-major, as cuBLASLt's "TN"
// FP8 kernels take them; the backend refuses a GPU without FP8 tensor cores at the first run,
// naming the step, the op and the SM.
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cuda/extern_kernel.h"

namespace anvil::codegen::cuda::ext {

namespace {

std::string ptr_of(const Program& p, const TensorView& t) {
  return "reinterpret_cast<const " + storage_type(t.dtype) + "*>(" + buffer_base(p, t.buffer) +
         ") + (" + t.offset.str() + ")";
}

bool all_ones(const std::vector<SymInt>& sizes) {
  for (const auto& s : sizes)
    if (!(s == SymInt(1))) return false;
  return true;
}

}  // namespace

std::string scaled_mm_gap(const ExternStep& e) {
  if (e.inputs.size() != 5 || e.outputs.size() != 1) return "aten._scaled_mm with other operands";
  const TensorView &a = e.inputs[0], &b = e.inputs[1];
  if (a.sizes.size() != 2 || b.sizes.size() != 2) return "aten._scaled_mm of non-matrices";
  const auto fp8 = [](DType t) { return t == DType::kFloat8E4M3FN || t == DType::kFloat8E5M2; };
  if (!fp8(a.dtype) || !fp8(b.dtype))
    return str("aten._scaled_mm of ", dtype_name(a.dtype), " x ", dtype_name(b.dtype),
               ": cuBLASLt's FP8 GEMM takes float8_e4m3fn and float8_e5m2 (the fnuz formats "
               "are AMD's)");
  if (!(a.strides[1] == SymInt(1)) || !(b.strides[0] == SymInt(1)))
    return "aten._scaled_mm operands not row-major x column-major";
  return "";
}

std::string scaled_mm(const Program& p, const ExternStep& e) {
  if (const std::string why = scaled_mm_gap(e); !why.empty())
    throw Error("internal error: an FP8 GEMM cuBLASLt cannot take reached its emitter",
                "codegen/cuda", "aten._scaled_mm of float8 matrices", e.name + ": " + why);
  const TensorView &a = e.inputs[0], &b = e.inputs[1], &sa = e.inputs[2], &sb = e.inputs[3],
                   &bias = e.inputs[4], &out = e.outputs[0];
  const bool rowwise = !(all_ones(sa.sizes) && all_ones(sb.sizes));
  std::ostringstream b_;
  b_ << "  const int64_t m = " << out.sizes[0].str() << ", n = " << out.sizes[1].str()
     << ", k = " << a.sizes[1].str() << ";\n";
  b_ << "  if (m <= 0 || n <= 0) return 0;\n";
  b_ << "  const AnvilDeviceApi* dev = s.api->device;\n";
  b_ << "  if (!dev || dev->abi_version < 6) {\n    s.api->set_error(s.run_ctx, \"" << e.name
     << ": aten._scaled_mm needs the device backend's FP8 GEMM (device ABI 6)\");\n"
     << "    return 1;\n  }\n";
  b_ << "  int device = 0;\n  cudaGetDevice(&device);\n";
  b_ << "  AnvilGemmArgs ga{};\n";
  b_ << "  ga.struct_size = sizeof ga;\n";
  b_ << "  ga.dtype = " << static_cast<int>(out.dtype) << ";  // " << dtype_name(out.dtype)
     << " D\n";
  b_ << "  ga.a_dtype = " << static_cast<int>(a.dtype) << ";  // " << dtype_name(a.dtype) << "\n";
  b_ << "  ga.b_dtype = " << static_cast<int>(b.dtype) << ";  // " << dtype_name(b.dtype) << "\n";
  b_ << "  ga.trans_a = 0;\n  ga.trans_b = 1;  // A row-major, B column-major (cuBLASLt's TN)\n";
  b_ << "  ga.m = m;\n  ga.n = n;\n  ga.k = k;\n";
  b_ << "  ga.alpha = 1.0f;\n  ga.beta = 0.0f;\n";
  b_ << "  ga.a = " << ptr_of(p, a) << ";\n  ga.lda = " << a.strides[0].str() << ";\n";
  b_ << "  ga.b = " << ptr_of(p, b) << ";\n  ga.ldb = " << b.strides[1].str() << ";\n";
  b_ << "  ga.d = reinterpret_cast<" << storage_type(out.dtype) << "*>("
     << buffer_base(p, out.buffer) << ") + (" << out.offset.str() << ");\n";
  b_ << "  ga.ldd = n;\n  ga.batch = 1;\n";
  if (bias.buffer >= 0) {
    b_ << "  ga.epilogue = ANVIL_EPILOGUE_BIAS;\n  ga.bias = " << ptr_of(p, bias) << ";\n";
  } else {
    b_ << "  ga.epilogue = ANVIL_EPILOGUE_NONE;\n";
  }
  b_ << "  ga.scale_a = " << ptr_of(p, sa) << ";\n  ga.scale_b = " << ptr_of(p, sb) << ";\n";
  b_ << "  ga.scale_rowwise = " << (rowwise ? 1 : 0) << ";\n";
  b_ << "  ga.fast_accum = " << int_attr(e, "use_fast_accum", 0) << ";\n";
  b_ << "  int rc = dev->gemm_ex(device, s.stream, &ga);\n";
  if (bias.buffer >= 0) {
    // cuBLASLt without a fused bias for this problem: the GEMM alone, then the bias kernel
    b_ << "  if (rc == ANVIL_GEMM_NOT_FUSED) {\n";
    b_ << "    ga.epilogue = ANVIL_EPILOGUE_NONE;\n    ga.bias = nullptr;\n";
    b_ << "    rc = dev->gemm_ex(device, s.stream, &ga);\n";
    b_ << "    if (rc == 0) {\n";
    b_ << "      " << e.name << "_bias<<<anvil_blocks(m * n, 256), 256, 0, "
       << "static_cast<cudaStream_t>(s.stream)>>>(static_cast<"
       << storage_type(out.dtype) << "*>(ga.d), "
       << ptr_of(p, bias) << ", m, n);\n";
    b_ << "      if (anvil_launch_check(s, \"" << e.name << "_bias\") != 0) return 1;\n";
    b_ << "    }\n  }\n";
  }
  b_ << "  if (rc != 0) {\n";
  b_ << "    char msg[1024];\n";
  b_ << "    snprintf(msg, sizeof msg, \"" << e.name
     << " (aten._scaled_mm): %s\", dev->last_error());\n";
  b_ << "    s.api->set_error(s.run_ctx, msg);\n    return 1;\n  }\n";
  b_ << "  return 0;\n";
  const std::string nodes = node_list(e);
  std::string text;
  if (bias.buffer >= 0) {
    // d[i, j] += bias[j] in float32, for a cuBLASLt that cannot fuse the bias here
    const std::string ot = storage_type(out.dtype), bt = storage_type(bias.dtype);
    text += "// " + e.name + "_bias: the bias of " + e.name + " where cuBLASLt does not fuse it\n";
    text += "__global__ void " + e.name + "_bias(" + ot + "* __restrict__ d, const " + bt +
            "* __restrict__ bias, int64_t m, int64_t n) {\n";
    text += "  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
            "idx < m * n;\n       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
    text += "    const float v = static_cast<float>(" + from_storage(out.dtype, "d[idx]") +
            ") + static_cast<float>(" + from_storage(bias.dtype, "bias[idx % n]") + ");\n";
    text += "    d[idx] = " + to_storage(out.dtype, "v", Dialect::kCuda) + ";\n  }\n}\n\n";
  }
  text += "// " + e.name + ": " + nodes + " (" + e.target +
          "): cuBLASLt's FP8 GEMM (api->device->gemm_ex, device ABI 6)\n";
  text += "ANVIL_HIDDEN int " + e.name + "(const RunState& s) {\n";
  text += symbol_decls(p, b_.str(), "s.sym", "  ") + b_.str() + "}\n";
  return text;
}

}  // namespace anvil::codegen::cuda::ext
