// The configurations of anvil's CPU GEMM templates, their names and the candidate list
// (cpu_templates.h). The text of a template is in cpu_templates_source.cpp.
#include "codegen/gemm/cpu_templates.h"

#include <algorithm>

#include "core/error.h"

namespace anvil::codegen::gemm {

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Bf16:
      return "avx512bf16";
    case CpuIsa::kAvx512Vnni:
      return "avx512vnni";
  }
  return "?";
}

std::vector<std::string> cpu_isa_features(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kAvx2:
      return {"avx2", "fma"};
    case CpuIsa::kAvx512:
      return {"avx2", "fma", "avx512f"};
    case CpuIsa::kAvx512Bf16:
      return {"avx2", "fma", "avx512f", "avx512bw", "avx512bf16"};
    case CpuIsa::kAvx512Vnni:
      return {"avx2", "fma", "avx512f", "avx512bw", "avx512vnni"};
  }
  return {"?"};
}

const char* cpu_gemm_types_token(CpuGemmTypes t) {
  switch (t) {
    case CpuGemmTypes::kF32:
      return "f32";
    case CpuGemmTypes::kBf16:
      return "bf16";
    case CpuGemmTypes::kBf16F32:
      return "bf16f32";
    case CpuGemmTypes::kI8I32:
      return "i8i32";
  }
  return "?";
}

std::string cpu_template_name(const CpuTemplateConfig& c) {
  return str("own_", cpu_gemm_types_token(c.types), "_", cpu_isa_name(c.isa), "_mr", c.mr, "_nr",
             c.nr, "_kc", c.kc, "_mc", c.mc, "_nc", c.nc, "_", c.trans_a ? "t" : "n",
             c.trans_b ? "t" : "n");
}

std::string cpu_template_entry(const CpuTemplateConfig& c) {
  return "anvil_gemm_" + cpu_template_name(c);
}

namespace {

struct Shape {
  int mr, nr;
  int64_t kc, mc, nc;
};

// Register tiles keep MR x NR/width accumulators plus NR/width B vectors and one A broadcast in
// the 32 zmm / 16 ymm registers. Cache blocks: the KC x NR B panel of one tile column in L1
// (48 KiB on this generation), the MC x KC A block in L2, NC bounds the work of one task.
const Shape kAvx512Shapes[] = {
    {6, 32, 256, 144, 1024}, {6, 32, 384, 96, 2048},   {6, 32, 512, 72, 1024},
    {8, 32, 256, 128, 1024}, {8, 32, 384, 96, 1024},   {12, 32, 256, 144, 1024},
    {12, 32, 384, 96, 2048}, {12, 32, 192, 192, 1024}, {14, 32, 256, 112, 1024},
    {14, 32, 384, 84, 2048}, {4, 64, 256, 128, 1024},  {4, 64, 384, 64, 2048},
    {6, 64, 256, 144, 1024}, {6, 64, 192, 96, 1024},   {8, 48, 256, 128, 960},
    {8, 48, 384, 96, 1920},  {12, 16, 512, 144, 1024}, {24, 16, 256, 144, 1024},
};
const Shape kAvx2Shapes[] = {
    {6, 16, 256, 144, 1024}, {6, 16, 384, 96, 2048}, {6, 16, 512, 72, 1024},
    {4, 24, 256, 128, 960},  {4, 24, 384, 96, 960},  {8, 8, 256, 128, 1024},
    {4, 16, 256, 128, 1024}, {3, 32, 256, 96, 1024}, {5, 16, 384, 120, 1024},
    {2, 48, 256, 64, 960},
};
// bf16 pairs: a K step is two values, so KC counts K values (even).
const Shape kAvx512Bf16Shapes[] = {
    {6, 32, 512, 144, 1024},  {6, 32, 256, 144, 1024}, {8, 32, 512, 128, 1024},
    {12, 32, 512, 144, 1024}, {12, 32, 256, 96, 2048}, {14, 32, 512, 112, 1024},
    {4, 64, 512, 128, 1024},  {6, 64, 384, 96, 1024},  {8, 48, 512, 128, 960},
    {12, 16, 768, 144, 1024},
};
// bf16 widened to fp32 while packing: a few of the fp32 shapes.
const Shape kAvx512WidenShapes[] = {
    {6, 32, 256, 144, 1024}, {12, 32, 256, 144, 1024}, {8, 48, 256, 128, 960},
    {6, 64, 256, 144, 1024}, {14, 32, 384, 84, 2048},
};
// int8 quads: KC counts K values (a multiple of 4).
const Shape kAvx512VnniShapes[] = {
    {6, 32, 512, 144, 1024},   {8, 32, 512, 128, 1024},  {12, 32, 512, 144, 1024},
    {14, 32, 512, 112, 1024},  {6, 64, 512, 144, 1024},  {4, 64, 1024, 128, 1024},
    {8, 48, 512, 128, 960},    {12, 32, 1024, 96, 2048}, {6, 32, 1024, 72, 1024},
    {12, 16, 1024, 144, 1024},
};
const Shape kAvx2WidenShapes[] = {
    {6, 16, 256, 144, 1024},
    {4, 24, 256, 128, 960},
    {6, 16, 384, 96, 2048},
};

template <size_t N>
std::vector<CpuTemplateConfig> expand(CpuGemmTypes t, CpuIsa isa, const Shape (&shapes)[N]) {
  std::vector<CpuTemplateConfig> out;
  for (const Shape& s : shapes) {
    CpuTemplateConfig c;
    c.types = t;
    c.isa = isa;
    c.mr = s.mr;
    c.nr = s.nr;
    c.kc = s.kc;
    c.mc = s.mc;
    c.nc = s.nc;
    out.push_back(c);
  }
  return out;
}

}  // namespace

bool has_cpu_features(const std::vector<std::string>& have,
                      const std::vector<std::string>& need) {
  for (const std::string& f : need)
    if (std::find(have.begin(), have.end(), f) == have.end()) return false;
  return true;
}

std::vector<CpuTemplateConfig> cpu_template_configs(CpuGemmTypes t, CpuIsa isa) {
  const bool f32 = t == CpuGemmTypes::kF32;
  if ((t == CpuGemmTypes::kI8I32) != (isa == CpuIsa::kAvx512Vnni)) return {};
  switch (isa) {
    case CpuIsa::kAvx2:
      return f32 ? expand(t, isa, kAvx2Shapes) : expand(t, isa, kAvx2WidenShapes);
    case CpuIsa::kAvx512:
      return f32 ? expand(t, isa, kAvx512Shapes) : expand(t, isa, kAvx512WidenShapes);
    case CpuIsa::kAvx512Bf16:
      return f32 ? std::vector<CpuTemplateConfig>{} : expand(t, isa, kAvx512Bf16Shapes);
    case CpuIsa::kAvx512Vnni:
      return expand(t, isa, kAvx512VnniShapes);
  }
  return {};
}

GemmCandidate cpu_template_candidate(const CpuTemplateConfig& c) {
  GemmCandidate cand;
  cand.name = cpu_template_name(c);
  cand.backend = GemmBackend::kOwn;
  cand.entry = cpu_template_entry(c);
  cand.source = cpu_template_source(c);
  cand.fuses_bias = cand.fuses_activation = c.types != CpuGemmTypes::kI8I32;
  return cand;
}

std::vector<GemmCandidate> cpu_template_candidates(const GemmProblem& p,
                                                   const std::vector<std::string>& cpu_features) {
  CpuGemmTypes types;
  if (p.a_dtype == DType::kFloat32 && p.b_dtype == DType::kFloat32 &&
      p.out_dtype == DType::kFloat32)
    types = CpuGemmTypes::kF32;
  else if (p.a_dtype == DType::kBFloat16 && p.b_dtype == DType::kBFloat16 &&
           p.out_dtype == DType::kBFloat16)
    types = CpuGemmTypes::kBf16;
  else if (p.a_dtype == DType::kBFloat16 && p.b_dtype == DType::kBFloat16 &&
           p.out_dtype == DType::kFloat32)
    types = CpuGemmTypes::kBf16F32;
  else if (p.a_dtype == DType::kInt8 && p.b_dtype == DType::kInt8 && p.out_dtype == DType::kInt32)
    types = CpuGemmTypes::kI8I32;  // exact int32 sums whatever acc_dtype says
  else
    return {};  // fp16 / fp64 have no template
  if (types != CpuGemmTypes::kI8I32 && p.acc_dtype != DType::kFloat32) return {};
  std::vector<GemmCandidate> out;
  for (CpuIsa isa : {CpuIsa::kAvx512Vnni, CpuIsa::kAvx512Bf16, CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (!has_cpu_features(cpu_features, cpu_isa_features(isa))) continue;
    for (CpuTemplateConfig c : cpu_template_configs(types, isa)) {
      c.trans_a = p.trans_a;
      c.trans_b = p.trans_b;
      out.push_back(cpu_template_candidate(c));
    }
  }
  return out;
}

}  // namespace anvil::codegen::gemm
