// Writes the CUTLASS candidates of a few representative problems (bench/cutlass_compile_all.sh
// compiles them): one <entry>.cu per candidate in DIR, and DIR/candidates.txt listing
// "<problem> <entry>" lines in generation order.
//   cutlass_dump DIR
#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "codegen/gemm/cutlass_candidates.h"
#include "codegen/gemm/gemm_filter.h"

using namespace anvil::codegen::gemm;
using anvil::DType;

namespace {

GemmProblem make(GemmOp op, DType t, int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  GemmProblem p;
  p.op = op;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_dtype = p.b_dtype = p.out_dtype = t;
  p.acc_dtype = DType::kFloat32;
  if (t == DType::kInt8) p.out_dtype = p.acc_dtype = DType::kInt32;
  p.trans_a = ta;
  p.trans_b = tb;
  p.align_a = p.align_b = t == DType::kInt8 ? 16 : 8;
  p.align_c = t == DType::kInt8 ? 4 : 8;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: cutlass_dump DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  std::vector<std::pair<std::string, GemmProblem>> problems;
  problems.push_back({"mm_bf16_1024x256x1024", make(GemmOp::kMm, DType::kBFloat16, 1024, 256, 1024, false, false)});
  GemmProblem lin = make(GemmOp::kAddmm, DType::kBFloat16, 512, 1408, 4096, false, true);
  lin.bias = GemmBias::kPerColumn;
  lin.beta = 1.0;
  lin.activation = GemmActivation::kGeluTanh;
  problems.push_back({"linear_bf16_gelu_512x1408x4096", lin});
  GemmProblem bmm = make(GemmOp::kBmm, DType::kFloat16, 256, 32, 256, true, false);
  bmm.batch = 10;
  bmm.acc_dtype = DType::kFloat16;
  problems.push_back({"bmm_f16acc_10x256x32x256", bmm});
  problems.push_back({"int_mm_100x32x16", make(GemmOp::kIntMm, DType::kInt8, 100, 32, 16, false, true)});
  // spec B.5 case 17: a full C matrix (beta * C), fp16; only the four its filters keep
  // (denylist "pingpong", max configs 4)
  GemmProblem full = make(GemmOp::kAddmm, DType::kFloat16, 4096, 2048, 25728, false, false);
  full.bias = GemmBias::kFull;
  full.alpha = 2.0;
  full.beta = 0.4;
  problems.push_back({"addmm_full_c_f16_4096x2048x25728", full});
  // spec B.5 case 21: mixed fp16 x int8, D rows of 100 halves (non-TMA epilogue) and aligned
  // ones with beta * C (TMA epilogue)
  GemmProblem mixed = make(GemmOp::kMixedMm, DType::kFloat16, 100, 100, 16, false, true);
  mixed.b_dtype = DType::kInt8;
  mixed.align_b = 16;
  mixed.align_c = 4;
  problems.push_back({"mixed_mm_f16_s8_100x100x16", mixed});
  mixed.m = 256;
  mixed.n = 512;
  mixed.k = 192;
  mixed.align_c = 8;
  mixed.beta = 0.25;
  problems.push_back({"mixed_mm_f16_s8_256x512x192", mixed});
  std::ofstream list(dir + "/candidates.txt");
  std::set<std::string> seen;
  GemmOptions case17;
  case17.deny_regex = "pingpong";
  for (const auto& [label, p] : problems) {
    std::vector<GemmCandidate> cands = cutlass_candidates(p, 90);
    if (p.bias == GemmBias::kFull) cands = filter_candidates(std::move(cands), case17, 4);
    for (const GemmCandidate& c : cands) {
      const std::string file = label + "__" + c.entry;
      if (!seen.insert(file).second) continue;
      std::ofstream(dir + "/" + file + ".cu") << c.source;
      list << label << " " << file << "\n";
    }
  }
  std::printf("%zu candidate sources in %s\n", seen.size(), dir.c_str());
  return 0;
}
