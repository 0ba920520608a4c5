// Row kernels of the CUDA target (codegen/cuda/emit_cuda.h): loop kernels with reductions or
// several passes (softmax, layer_norm, RMSNorm, sums over the last dims), whose passes loop over
// the inner dims of each outer point (a row). Rows map onto threads in one of three ways:
//
// - a block per row (long rows, and rows of a symbolic size): block_threads(inner) threads split
//   each pass loop, block_reduce combines their partial results (shuffles, a shared scratch,
//   __syncthreads), thread 0 runs the per-row statements' stores;
// - a warp per row (short rows: a constant size of at most kWarpRowMax elements, or
//   kWarpRowVectors vectors in the vectorized form): 8 rows per block of 256 threads, the lanes
//   of a warp split the row, warp_reduce (a xor butterfly of shuffles: every lane gets the
//   result) combines them, __syncwarp orders the lanes' stores, lane 0 runs the per-row stores.
//   A block per row of 32 threads left most of an SM idle (32 blocks per SM at most);
// - a thread per row (short strided rows: a constant size of at most kThreadRowMax elements, the
//   row's elements far apart in memory but 32+ consecutive rows next to each other, as a
//   layer_norm over the channels of an NCHW activation seen through a permute; thread_per_row
//   weighs such accesses against those contiguous along the row): each thread runs its row's
//   passes serially with its own accumulators, no guard and no barrier, so a warp's loads are 32
//   adjacent elements instead of one 32-byte sector per element. It runs only with rows enough
//   to keep the GPU's memory busy (kThreadRowsMin), the kernel of one of the other forms
//   otherwise.
//
// - vectorized rows of at most 16 vectors: a warp takes 32 / W rows, W lanes (the next power of
//   two, at least 4) per row, seg_reduce over a segment's lanes, __syncwarp on the segment's
//   mask (ANVIL_CUDA_ROW_SEGMENTS=0 at compile time: a warp per row). ConvNeXt-T's stage-1
//   layer norms (rows of 96 bf16 channels: 12 vectors) kept 12 of a warp's 32 lanes busy,
//   630 GB/s in the synchronized profile at bf16 batch 32 on an H200; sharing the warp took the
//   model from 2.449 to 2.343 ms back to back there (session 33).
//
// The forms are chosen by default (ANVIL_CUDA_ROWS unset or =auto at compile time); =block
// keeps a block per row everywhere. On an H200 they took ConvNeXt-T at bf16 batch 32 from 4.04
// to 3.87 ms (and changed nothing measurable in EfficientNet-B0 or MobileNetV3-Small); their GPU
// tests (CudaRows.*) passed on 2 x H200 in session 20.
#include <algorithm>
#include <cstdlib>
#include <optional>
#include <set>
#include <sstream>

#include "codegen/c_expr.h"
#include "codegen/cuda/emit_cuda.h"
#include "codegen/gemm/gemm_epilogue.h"  // affine
#include "core/env_switch.h"
#include "core/error.h"

namespace anvil::codegen::cuda {

namespace {

using passes::LoopKernel;

constexpr int64_t kWarpRowMax = 128;     // elements a warp per row takes (4 per lane)
constexpr int64_t kWarpRowVectors = 32;  // vectors a warp per row takes (1 per lane)
constexpr int64_t kThreadRowMax = 1024;  // elements a thread per row takes
// Rows a thread-per-row launch needs: below, a thread's serial passes are latency-bound (few
// warps per SM) and a block per row wins; an estimate (8192 rows: about 2 warps per SM of an
// H100), to be measured.
constexpr int64_t kThreadRowsMin = 8192;
constexpr int kWarpRows = 8;           // rows (warps) per block of the warp form
constexpr int kThreadRowThreads = 64;  // threads (rows) per block of the thread form

enum class RowMode { kBlock, kWarp, kThread };

bool stores_memory(const passes::Program& p, const std::vector<passes::Stmt>& stmts) {
  return std::any_of(stmts.begin(), stmts.end(), [&](const passes::Stmt& s) {
    return !p.buffers[static_cast<size_t>(s.buffer)].local;
  });
}

const char* reduce_functor(passes::ReduceOp op) {
  switch (op) {
    case passes::ReduceOp::kSum:
      return "SumOp()";
    case passes::ReduceOp::kProd:
      return "ProdOp()";
    case passes::ReduceOp::kMax:
      return "MaxOp()";
    case passes::ReduceOp::kMin:
      return "MinOp()";
    case passes::ReduceOp::kAny:
      return "OrOp()";
    case passes::ReduceOp::kAll:
      return "AndOp()";
  }
  return "SumOp()";
}

/// The shared scratch array for block reductions of compute type `ct`.
std::string scratch_name(const std::string& ct) {
  if (ct == "float") return "red_f";
  if (ct == "double") return "red_d";
  if (ct == "int") return "red_n";
  return "red_i";
}

int block_threads(const SymInt& inner) {
  if (!inner.is_constant()) return 256;
  const int64_t n = inner.constant();
  int t = 32;
  while (t < n && t < 256) t *= 2;
  return t;
}

bool min_max_nan(const passes::Stmt& s) {
  return is_floating(s.dtype) && (s.reduce == ReduceOp::kMax || s.reduce == ReduceOp::kMin);
}

/// The body of a row kernel for one row `lin`: its passes, each pass loop split over the
/// `threads` threads of a block or a warp (scalar, or with `vp` vectorized) or run by one thread;
/// the compute types of block reductions' shared scratch arrays go into `scratch`.
std::string row_body(const passes::Program& p, const LoopKernel& k, RowMode mode, int threads,
                     const RowVectorPlan* vp, std::set<std::string>& scratch) {
  std::ostringstream body_os;
  Body body(p, body_os, Dialect::kCuda);
  body.push();
  SymInt inner_n(1);
  for (const auto& s : k.inner) inner_n = inner_n * s;
  // who stores a row's values, how the row's threads see each other's stores, which thread
  const std::string guard = mode == RowMode::kBlock  ? "if (threadIdx.x == 0) "
                            : mode == RowMode::kWarp ? "if (lane == 0) "
                                                     : "";
  const std::string ind = "    ";
  const bool segments = mode == RowMode::kWarp && threads < 32;  // rows of W < 32 lanes
  const std::string barrier = mode == RowMode::kBlock ? ind + "__syncthreads();\n"
                              : segments               ? ind + "__syncwarp(seg_mask);\n"
                              : mode == RowMode::kWarp ? ind + "__syncwarp();\n"
                                                       : "";
  const std::string tid = mode == RowMode::kWarp ? "lane" : "threadIdx.x";
  body_os << decompose(k.outer, "lin", "o", ind);
  for (size_t pi = 0; pi < k.passes.size(); ++pi) {
    const auto& pass = k.passes[pi];
    emit_stmts(body, p, pass.pre, ind, body_os, guard);
    if (stores_memory(p, pass.pre)) body_os << barrier;
    if (!pass.loop.empty()) {
      for (const passes::Stmt& s : pass.loop) {
        if (s.kind != passes::Stmt::Kind::kReduce) continue;
        body_os << ind << compute_type(s.dtype, Dialect::kCuda) << " acc" << s.acc << " = "
                << acc_init(s.reduce, is_floating(s.dtype)) << ";\n";
        if (min_max_nan(s)) body_os << ind << "int nan" << s.acc << " = 0;\n";
      }
      if (vp) {
        emit_row_vector_loop(body, p, k, *vp, pi, threads, tid, ind, body_os);
      } else {
        if (mode == RowMode::kThread) {
          // the whole row in this thread; unrolled, its loads are issued ahead of the
          // accumulation that chains them
          body_os << ind
                  << (inner_n.is_constant() && inner_n.constant() <= 16 ? "#pragma unroll\n"
                                                                        : "#pragma unroll 8\n")
                  << ind << "for (int64_t rr = 0; rr < (" << inner_n.str() << "); ++rr) {\n";
        } else if (inner_n.is_constant() && inner_n.constant() % threads == 0 &&
                   inner_n.constant() / threads <= 16) {
          // A constant trip count, unrolled: each thread issues its loads of the row together
          // instead of one round trip to memory per element (the accumulation chains them).
          body_os << ind << "#pragma unroll\n"
                  << ind << "for (int64_t jj = 0; jj < " << inner_n.constant() / threads
                  << "; ++jj) {\n"
                  << ind << "  const int64_t rr = " << tid << " + jj * " << threads << ";\n";
        } else {
          body_os << ind << "#pragma unroll 4\n"
                  << ind << "for (int64_t rr = " << tid << "; rr < (" << inner_n.str()
                  << "); rr += " << threads << ") {\n";
        }
        body_os << decompose(k.inner, "rr", "r", ind + "  ");
        body.push();
        emit_stmts(body, p, pass.loop, ind + "  ", body_os);
        body.pop();
        body_os << ind << "}\n";
      }
      for (const passes::Stmt& s : pass.loop) {  // combine the threads' partial results
        if (s.kind != passes::Stmt::Kind::kReduce || mode == RowMode::kThread) continue;
        const std::string acc = "acc" + std::to_string(s.acc), nan = "nan" + std::to_string(s.acc);
        if (mode == RowMode::kWarp) {
          const std::string red =
              segments ? "seg_reduce<" + std::to_string(threads) + ">(" : "warp_reduce(";
          const std::string mask = segments ? ", seg_mask" : "";
          body_os << ind << acc << " = " << red << acc << ", " << reduce_functor(s.reduce) << mask
                  << ");\n";
          if (min_max_nan(s))
            body_os << ind << nan << " = " << red << nan << ", OrOp()" << mask << ");\n";
          continue;
        }
        const std::string ct = compute_type(s.dtype, Dialect::kCuda);
        scratch.insert(ct);
        body_os << ind << acc << " = block_reduce(" << acc << ", " << reduce_functor(s.reduce)
                << ", " << scratch_name(ct) << ");\n";
        if (min_max_nan(s)) {
          scratch.insert("int");
          body_os << ind << nan << " = block_reduce(" << nan << ", OrOp(), red_n);\n";
        }
      }
      finish_reductions(body, p, pass.loop, ind, body_os, guard);
      bool reduced_store = false;
      for (const passes::Stmt& s : pass.loop)
        reduced_store |= s.kind == passes::Stmt::Kind::kReduce &&
                         !p.buffers[static_cast<size_t>(s.buffer)].local;
      if (stores_memory(p, pass.loop) || reduced_store) body_os << barrier;
    }
    emit_stmts(body, p, pass.post, ind, body_os, guard);
    if (stores_memory(p, pass.post)) body_os << barrier;
  }
  body.pop();
  return body_os.str();
}

/// Whether one thread per row suits row kernel `k`: rows of a constant size of at most
/// kThreadRowMax whose pass loops move more bytes through accesses where a warp's rows lie next
/// to each other (the trailing outer dims' coefficients run 1, size, size * size... over 32 rows
/// at least) but the row's elements do not, than through accesses contiguous along the row
/// (coefficient 1 on the last inner dim). Accesses the same for every row (a weight) or for
/// every element of a row (a row's statistic) favour neither; a non-affine index (a floordiv)
/// keeps the other forms.
bool thread_per_row(const passes::Program& p, const LoopKernel& k) {
  SymInt inner_n(1);
  for (const auto& s : k.inner) inner_n = inner_n * s;
  if (!inner_n.is_constant() || inner_n.constant() > kThreadRowMax) return false;
  const size_t no = k.outer.size();
  std::vector<std::string> vars;
  std::vector<SymInt> sizes;
  passes::loop_vars(k, vars, sizes);
  size_t li = vars.size();  // the last inner dim that is not 1
  for (size_t d = k.inner.size(); d-- > 0;)
    if (!(k.inner[d] == SymInt(1))) {
      li = no + d;
      break;
    }
  int64_t across = 0, along = 0;  // bytes contiguous across rows / along a row
  bool affine_all = true;
  const auto weigh = [&](int buffer, const SymInt& index) {
    const auto& buf = p.buffers[static_cast<size_t>(buffer)];
    if (buf.local) return;
    const std::optional<Affine> a = affine(index, vars);
    if (!a) {
      affine_all = false;
      return;
    }
    const auto moves = [&](size_t from, size_t to) {
      for (size_t d = from; d < to; ++d)
        if (!(a->coef[d] == SymInt(0))) return true;
      return false;
    };
    if (!moves(0, no) || !moves(no, vars.size())) return;  // neutral
    const int64_t bytes = static_cast<int64_t>(dtype_size(buf.dtype));
    if (li < vars.size() && a->coef[li] == SymInt(1)) {
      along += bytes;
      return;
    }
    SymInt run(1);  // consecutive rows whose elements lie next to each other
    for (size_t d = no; d-- > 0;) {
      if (k.outer[d] == SymInt(1)) continue;
      if (!(a->coef[d] == run)) break;
      run = run * k.outer[d];
    }
    if (!(run == SymInt(1)) && (!run.is_constant() || run.constant() >= 32)) across += bytes;
  };
  for (const passes::Pass& pass : k.passes)
    for (const passes::Stmt& st : pass.loop) {
      std::vector<int> loads;
      p.exprs.loads(st.expr, loads);
      for (int l : loads) weigh(p.exprs.at(l).buffer, p.exprs.at(l).index);
      if (st.kind == passes::Stmt::Kind::kStore) weigh(st.buffer, st.index);
    }
  return affine_all && across > along;
}

/// Threads per block of a row kernel in form `mode` whose rows `threads` threads split.
int block_size(RowMode mode, int threads) {
  return mode == RowMode::kWarp     ? kWarpRows * 32
         : mode == RowMode::kThread ? kThreadRowThreads
                                    : threads;
}

/// `__global__` kernel `name` of row kernel `k` in form `mode`, each row split over `threads`
/// threads (1 for a thread per row), vectorized by `vp` when not null.
std::string row_kernel(const passes::Program& p, const LoopKernel& k, const std::string& name,
                       RowMode mode, int threads, const RowVectorPlan* vp) {
  SymInt outer_n(1), inner_n(1);
  for (const auto& s : k.outer) outer_n = outer_n * s;
  for (const auto& s : k.inner) inner_n = inner_n * s;
  std::set<std::string> scratch;  // compute types of block reductions' shared scratch arrays
  const std::string text = row_body(p, k, mode, threads, vp, scratch);
  const std::string n = "(" + outer_n.str() + ")";
  std::ostringstream fn;
  fn << kernel_head(p, kernel_roots(p, k), name, block_size(mode, threads),
                    text + outer_n.str() + " " + inner_n.str());
  switch (mode) {
    case RowMode::kBlock:
      for (const std::string& ct : scratch)
        fn << "  __shared__ " << ct << " " << scratch_name(ct) << "[32];\n";
      fn << "  for (int64_t lin = blockIdx.x; lin < " << n << "; lin += gridDim.x) {\n";
      break;
    case RowMode::kWarp:
      if (threads < 32) {  // segments of `threads` lanes, a row each
        const int rows = kWarpRows * 32 / threads;
        fn << "  const int lane = threadIdx.x & " << threads - 1 << ";\n  (void)lane;\n"
           << "  const unsigned seg_mask = " << (1u << threads) - 1
           << "u << (threadIdx.x & 31 & ~" << threads - 1 << "u);\n  (void)seg_mask;\n"
           << "  for (int64_t lin = static_cast<int64_t>(blockIdx.x) * " << rows
           << " + threadIdx.x / " << threads << "; lin < " << n
           << ";\n       lin += static_cast<int64_t>(gridDim.x) * " << rows << ") {\n";
        break;
      }
      fn << "  const int lane = threadIdx.x & 31;\n  (void)lane;\n"
         << "  for (int64_t lin = static_cast<int64_t>(blockIdx.x) * " << kWarpRows
         << " + (threadIdx.x >> 5); lin < " << n
         << ";\n       lin += static_cast<int64_t>(gridDim.x) * " << kWarpRows << ") {\n";
      break;
    case RowMode::kThread:
      fn << "  for (int64_t lin = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; "
            "lin < "
         << n << ";\n       lin += static_cast<int64_t>(gridDim.x) * blockDim.x) {\n";
      break;
  }
  fn << text << "  }\n}\n\n";
  return fn.str();
}

/// "one warp per row, ..." / "one block of T threads per row": the comment naming a form.
std::string form_name(RowMode mode, int threads) {
  if (mode == RowMode::kWarp && threads < 32)
    return std::to_string(32 / threads) + " rows per warp (" + std::to_string(threads) +
           " lanes each), " + std::to_string(kWarpRows * 32 / threads) + " rows per block of " +
           std::to_string(kWarpRows * 32) + " threads";
  if (mode == RowMode::kWarp)
    return "one warp per row, " + std::to_string(kWarpRows) + " rows per block of " +
           std::to_string(kWarpRows * 32) + " threads";
  return "one block of " + std::to_string(threads) + " threads per row";
}

/// The grid of a launch in form `mode` (`threads` lanes per row of the warp form): blocks for
/// n_outer rows.
std::string row_grid(RowMode mode, int threads) {
  const int rows = mode == RowMode::kWarp     ? kWarpRows * 32 / threads
                   : mode == RowMode::kThread ? kThreadRowThreads
                                              : 1;
  return "anvil_blocks(n_outer, " + std::to_string(rows) + ")";
}

}  // namespace

RowKernels emit_row_kernels(const passes::Program& p, const LoopKernel& k) {
  SymInt inner_n(1);
  for (const auto& s : k.inner) inner_n = inner_n * s;
  const std::set<int> roots = kernel_roots(p, k);
  const char* env = std::getenv("ANVIL_CUDA_ROWS");
  const std::string rows = env != nullptr ? env : "";
  if (!rows.empty() && rows != "auto" && rows != "block")
    throw Error("ANVIL_CUDA_ROWS names no form of row kernels", "codegen/cuda " + k.name,
                "auto or block (or unset: auto)", rows);
  const bool block_only = rows == "block";
  // whether a row of `per_row`-element units (elements or vectors) has at most `max` of them
  const auto fits = [&](int64_t per_row, int64_t max) {
    return !block_only && inner_n.is_constant() && inner_n.constant() <= per_row * max;
  };
  std::ostringstream fn, launch;
  const auto launch_of = [&](const std::string& kernel, RowMode mode, int threads,
                             const std::string& ind) {
    return kernel_launch(p, roots, kernel, k.name, row_grid(mode, threads),
                         block_size(mode, threads), ind);
  };
  // one thread per row where rows are strided and adjacent rows adjacent, given rows enough
  if (!block_only && thread_per_row(p, k)) {
    fn << "// " << k.name << "_kernel_rt: one thread per row (rows of " << inner_n.str()
       << " strided elements, adjacent rows adjacent in memory), for " << kThreadRowsMin
       << "+ rows\n"
       << row_kernel(p, k, k.name + "_kernel_rt", RowMode::kThread, 1, nullptr);
    launch << "  if (n_outer >= " << kThreadRowsMin << ") {  // rows enough to fill the GPU\n"
           << launch_of(k.name + "_kernel_rt", RowMode::kThread, 1, "    ") << "    return;\n  }\n";
  }
  // else a warp per short row, a block per longer one: scalar, and vectorized where aligned
  const RowMode mode = fits(1, kWarpRowMax) ? RowMode::kWarp : RowMode::kBlock;
  const int threads = mode == RowMode::kWarp ? 32 : block_threads(inner_n);
  fn << "// " << k.name << "_kernel: " << form_name(mode, threads) << "\n"
     << row_kernel(p, k, k.name + "_kernel", mode, threads, nullptr);
  const RowVectorPlan rp = plan_row_vector(p, k);
  if (rp.width > 0) {
    const RowMode vmode = fits(rp.width, kWarpRowVectors) ? RowMode::kWarp : RowMode::kBlock;
    int vthreads =
        vmode == RowMode::kWarp
            ? 32
            : block_threads(inner_n.is_constant() ? SymInt(inner_n.constant() / rp.width)
                                                  : inner_n);
    // rows of at most 16 vectors share a warp (W lanes each, W a power of two >= 4)
    if (vmode == RowMode::kWarp && env_switch("ANVIL_CUDA_ROW_SEGMENTS", true) &&
        fits(rp.width, 16)) {
      const int64_t vectors = inner_n.constant() / rp.width;
      vthreads = 4;
      while (vthreads < vectors) vthreads *= 2;
    }
    fn << "// " << k.name << " vectorized: rows of " << rp.width << "-element vectors, "
       << form_name(vmode, vthreads) << "\n"
       << row_kernel(p, k, k.name + "_kernel_rv", vmode, vthreads, &rp);
    launch << "  if (" << rp.align_check << ") {\n"
           << launch_of(k.name + "_kernel_rv", vmode, vthreads, "    ") << "    return;\n  }\n";
  }
  launch << launch_of(k.name + "_kernel", mode, threads, "  ");
  return {fn.str(), launch.str()};
}

}  // namespace anvil::codegen::cuda
