// AnvilDeviceApi::conv: 2-D forward convolutions through cuDNN's graph API (the frontend's
// conv_fprop node, followed by pointwise nodes for the bias and the activation when asked).
//
// As cuda_attention.cpp: plans are cached per thread and problem (a cuDNN handle carries its
// stream, and an executed frontend graph keeps per-call state), a problem no engine takes is
// remembered with the reason, and the workspace is the stream's (stream_workspace). A fused
// problem (bias or activation) no engine takes answers ANVIL_CONV_NOT_FUSED, and the caller
// asks again for the plain convolution and applies the rest itself; a plain convolution no
// engine takes answers ANVIL_DEVICE_UNSUPPORTED, and the caller runs its host path.
#include <cudnn.h>

#include "cuda_backend_internal.h"

#ifdef ANVIL_NO_CUDNN_FRONTEND  // configured without the frontend's headers (CMakeLists.txt)

namespace anvil::cuda_backend {

int backend_conv(int device, void* stream, const AnvilConvArgs* args) {
  (void)device, (void)stream, (void)args;
  fail("conv: this build of libanvil_cuda has no cuDNN frontend (its headers could not be "
       "fetched at configure time): the convolution runs on the host");
  return ANVIL_DEVICE_UNSUPPORTED;
}

}  // namespace anvil::cuda_backend

#else

#include <cudnn_frontend.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace anvil::cuda_backend {

namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kX = 1, kW, kY, kBias, kResidual };

// Everything a plan depends on: the problem, its layout and options (pointers are only
// checked for alignment, which every plan assumes).
struct ConvKey {
  int device;
  int32_t dtype;
  int64_t dims[18];
  int64_t strides[4][4];  // x, w, y, residual
  int32_t has_bias, has_residual, activation, tf32;
  auto operator<=>(const ConvKey&) const = default;
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;  // null: unsupported
  std::string why;                          // the reason, when unsupported
  int64_t workspace = 0;
  int64_t index = -1;   // the plan run (execute_plan_at_index); -1: the heuristic's choice
  bool tune = false;    // every plan built, to be timed at the first execution
};

// Engine timing (ANVIL_CUDNN_AUTOTUNE, on unless "0"): at a problem's first convolution outside
// a CUDA graph capture every engine the heuristics list is built and timed on the call's own
// tensors (the frontend's autotune), and the fastest runs from then on. The winner's engine
// name is kept per process, so every thread (each has its own handles and plans) runs the same
// engine: results do not depend on which thread or runner computes them.
bool autotune_enabled() {  // read at each plan build (rare), so tests can switch it
  const char* v = std::getenv("ANVIL_CUDNN_AUTOTUNE");
  return v == nullptr || std::strcmp(v, "0") != 0;
}

constexpr int64_t kTuneWorkspace = int64_t{256} << 20;  // engines needing more are not timed

std::mutex g_winner_mu;
std::map<ConvKey, std::string> g_winner;  // problem -> the engine timed fastest

std::string winner_of(const ConvKey& key) {
  std::lock_guard<std::mutex> lock(g_winner_mu);
  auto it = g_winner.find(key);
  return it == g_winner.end() ? std::string() : it->second;
}

// The calling thread's handles (one per device) and plans.
struct ThreadState {
  std::unordered_map<int, cudnnHandle_t> handles;
  std::map<ConvKey, Plan> plans;
  ~ThreadState() {
    for (auto& [device, h] : handles) {
      if (cudaSetDevice(device) == cudaSuccess) cudnnDestroy(h);
    }
  }
};
thread_local ThreadState t_conv;

std::vector<int64_t> vec4(const int64_t* v) { return {v[0], v[1], v[2], v[3]}; }

fe::DataType_t fe_type(int32_t dtype) {
  if (dtype == kDTypeBFloat16) return fe::DataType_t::BFLOAT16;
  if (dtype == kDTypeFloat16) return fe::DataType_t::HALF;
  return fe::DataType_t::FLOAT;
}

// The plan of `a` built with `handle`, or the reason none applies (Plan::graph null): the
// engine named `winner` when there is one, else (when `tune`) every engine, to be timed at the
// first execution, else the heuristic's first that builds.
Plan build_plan_or_throw(cudnnHandle_t handle, const AnvilConvArgs& a, const std::string& winner,
                         bool tune) {
  Plan p;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(fe_type(a.dtype))
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const auto tensor = [&](const char* name, Uid uid, std::vector<int64_t> dims,
                          std::vector<int64_t> stride) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(std::move(dims))
                         .set_stride(std::move(stride)));
  };
  auto x = tensor("X", kX, {a.batch, a.in_channels, a.in_h, a.in_w}, vec4(a.x_stride));
  auto w = tensor("W", kW, {a.out_channels, a.in_channels / a.groups, a.kernel_h, a.kernel_w},
                  vec4(a.w_stride));
  auto opts = fe::graph::Conv_fprop_attributes()
                  .set_name("anvil_conv")
                  .set_pre_padding({a.pad_top, a.pad_left})
                  .set_post_padding({a.pad_bottom, a.pad_right})
                  .set_stride({a.stride_h, a.stride_w})
                  .set_dilation({a.dilation_h, a.dilation_w})
                  .set_compute_data_type(fe::DataType_t::FLOAT);
  auto y = g->conv_fprop(x, w, opts);
  if (a.bias != nullptr) {
    auto b = tensor("Bias", kBias, {1, a.out_channels, 1, 1}, {a.out_channels, 1, 1, 1});
    y = g->pointwise(y, b,
                     fe::graph::Pointwise_attributes()
                         .set_name("anvil_conv_bias")
                         .set_mode(fe::PointwiseMode_t::ADD)
                         .set_compute_data_type(fe::DataType_t::FLOAT));
  }
  if (a.residual != nullptr) {
    auto r = tensor("Residual", kResidual, {a.batch, a.out_channels, a.out_h, a.out_w},
                    vec4(a.residual_stride));
    y = g->pointwise(y, r,
                     fe::graph::Pointwise_attributes()
                         .set_name("anvil_conv_residual")
                         .set_mode(fe::PointwiseMode_t::ADD)
                         .set_compute_data_type(fe::DataType_t::FLOAT));
  }
  if (a.activation == ANVIL_CONV_ACT_RELU)
    y = g->pointwise(y, fe::graph::Pointwise_attributes()
                            .set_name("anvil_conv_relu")
                            .set_mode(fe::PointwiseMode_t::RELU_FWD)
                            .set_compute_data_type(fe::DataType_t::FLOAT));
  y->set_output(true)
      .set_uid(kY)
      .set_data_type(fe_type(a.dtype))
      .set_dim({a.batch, a.out_channels, a.out_h, a.out_w})
      .set_stride(vec4(a.y_stride));
  const auto step = [&](const char* what, fe::error_t e) {
    if (e.is_good()) return true;
    p.why = format("cuDNN %s: %s", what, e.get_message().c_str());
    return false;
  };
  if (!step("validate", g->validate()) ||
      !step("build_operation_graph", g->build_operation_graph(handle)) ||
      !step("create_execution_plans",
            g->create_execution_plans({fe::HeurMode_t::A, fe::HeurMode_t::FALLBACK})))
    return p;
  // fp32 accumulation on every engine (anvil_device.h), as PyTorch filters its cuDNN engines;
  // PyTorch's torch.backends.cudnn.allow_tf32 = False: no tensor-core engine for float32
  std::vector<fe::NumericalNote_t> notes = {fe::NumericalNote_t::DOWN_CONVERT_INPUTS,
                                            fe::NumericalNote_t::REDUCED_PRECISION_REDUCTION};
  if (a.dtype == kDTypeFloat32 && a.allow_tf32 == 0)
    notes.push_back(fe::NumericalNote_t::TENSOR_CORE);
  g->deselect_numeric_notes(notes);
  if (!step("check_support", g->check_support(handle))) return p;
  if (!winner.empty()) {
    for (int64_t i = 0, n = g->get_execution_plan_count(); i < n; ++i) {
      std::string name;
      if (g->get_plan_name_at_index(i, name).is_bad() || name != winner) continue;
      if (g->build_plan_at_index(handle, i).is_good() &&
          g->get_workspace_size_plan_at_index(i, p.workspace).is_good()) {
        p.index = i;
        p.graph = std::move(g);
        return p;
      }
      break;
    }
  }  // the winner is not among this thread's plans: as without one
  if (tune) {  // every engine whose workspace stays within kTuneWorkspace, to be timed
    g->deselect_workspace_greater_than(kTuneWorkspace);
    if (g->build_plans(handle, fe::BuildPlanPolicy_t::ALL).is_good()) {
      p.workspace = g->get_autotune_workspace_size();
      p.tune = true;
      p.graph = std::move(g);
      return p;
    }
  }
  if (!step("build_plans", g->build_plans(handle)) ||
      !step("get_workspace_size", g->get_workspace_size(p.workspace)))
    return p;
  p.graph = std::move(g);
  return p;
}

// build_plan_or_throw, with an exception of the frontend (some of its calls throw) taken as
// "no plan", remembered like any other reason.
Plan build_plan(cudnnHandle_t handle, const AnvilConvArgs& a, const std::string& winner,
                bool tune) {
  try {
    return build_plan_or_throw(handle, a, winner, tune);
  } catch (const std::exception& e) {
    Plan p;
    p.why = format("cuDNN frontend exception: %s", e.what());
    return p;
  }
}

// Why the problem is outside what this entry point takes, or "" (before asking cuDNN).
std::string precheck(const AnvilConvArgs& a) {
  if (a.dtype != kDTypeFloat32 && a.dtype != kDTypeBFloat16 && a.dtype != kDTypeFloat16)
    return format("dtype code %d (cuDNN convolutions here take float32, bfloat16, float16)",
                  a.dtype);
  const int64_t sizes[] = {a.batch,    a.in_channels, a.in_h,     a.in_w,    a.out_channels,
                           a.kernel_h, a.kernel_w,    a.out_h,    a.out_w,   a.groups,
                           a.stride_h, a.stride_w,    a.dilation_h, a.dilation_w};
  for (int64_t s : sizes)
    if (s <= 0) return "an empty or negative size, stride, dilation or group count";
  if (a.pad_top < 0 || a.pad_left < 0 || a.pad_bottom < 0 || a.pad_right < 0)
    return "a negative padding";
  if (a.in_channels % a.groups != 0 || a.out_channels % a.groups != 0)
    return format("%" PRId64 " groups do not divide %" PRId64 " input and %" PRId64
                  " output channels",
                  a.groups, a.in_channels, a.out_channels);
  const void* ptrs[5] = {a.x, a.w, a.y, a.bias, a.residual};
  const char* names[5] = {"x", "w", "y", "bias", "residual"};
  for (int t = 0; t < 5; ++t)
    if (reinterpret_cast<uintptr_t>(ptrs[t]) % 16 != 0)
      return format("%s is not 16-byte aligned", names[t]);
  if (a.residual != nullptr && a.residual == a.y)
    return "a residual that is the output itself (they must not overlap)";
  if (a.activation != ANVIL_CONV_ACT_NONE && a.activation != ANVIL_CONV_ACT_RELU)
    return format("activation code %d", a.activation);
  return "";
}

// The strides of logical NCHW `sizes` with each size-1 dim's stride (arbitrary in a view, checked
// by cuDNN all the same) made the packed one of the tensor's layout, as PyTorch does for its
// cuDNN descriptors: channels-last when the channel dim is the innermost, else NCHW.
void normalize(const int64_t* sizes, int64_t* stride) {
  const bool nhwc = sizes[1] > 1 && stride[1] == 1;
  static const int kNchw[4] = {3, 2, 1, 0}, kNhwc[4] = {1, 3, 2, 0};  // innermost first
  const int* order = nhwc ? kNhwc : kNchw;
  int64_t packed = 1;
  for (int i = 0; i < 4; ++i) {
    const int d = order[i];
    if (sizes[d] == 1) stride[d] = packed;
    packed *= sizes[d];
  }
}

AnvilConvArgs normalized(const AnvilConvArgs& a) {
  AnvilConvArgs n = a;
  const int64_t x[4] = {a.batch, a.in_channels, a.in_h, a.in_w};
  const int64_t w[4] = {a.out_channels, a.groups > 0 ? a.in_channels / a.groups : 0, a.kernel_h,
                        a.kernel_w};
  const int64_t y[4] = {a.batch, a.out_channels, a.out_h, a.out_w};
  normalize(x, n.x_stride);
  normalize(w, n.w_stride);
  normalize(y, n.y_stride);
  if (a.residual != nullptr) normalize(y, n.residual_stride);
  return n;
}

std::string problem_text(const AnvilConvArgs& a) {
  return format("x [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "], w [%" PRId64
                ", %" PRId64 ", %" PRId64 ", %" PRId64 "], groups %" PRId64 ", stride %" PRId64
                "x%" PRId64 ", dilation %" PRId64 "x%" PRId64 ", dtype code %d%s%s%s",
                a.batch, a.in_channels, a.in_h, a.in_w, a.out_channels,
                a.groups > 0 ? a.in_channels / a.groups : 0, a.kernel_h, a.kernel_w, a.groups,
                a.stride_h, a.stride_w, a.dilation_h, a.dilation_w, a.dtype,
                a.bias ? ", bias" : "", a.residual ? ", residual" : "",
                a.activation == ANVIL_CONV_ACT_RELU ? ", relu" : "");
}

// A plan built for timing that will not be timed: the heuristic's first engine that built.
void untune(Plan& plan) {
  plan.tune = false;
  for (int64_t i = 0, n = plan.graph->get_execution_plan_count(); i < n; ++i)
    if (plan.graph->get_workspace_size_plan_at_index(i, plan.workspace).is_good()) {
      plan.index = i;
      return;
    }
}

// The index of the plan called `name` among g's, or -1.
int64_t plan_named(fe::graph::Graph& g, const std::string& name) {
  for (int64_t i = 0, n = g.get_execution_plan_count(); i < n; ++i) {
    std::string at;
    if (g.get_plan_name_at_index(i, at).is_good() && at == name) return i;
  }
  return -1;
}

// Times every built plan of `g` on the call's own tensors (fastest_candidate); the fastest
// plan's index, or -1 when none ran.
int64_t time_plans(fe::graph::Graph& g, cudnnHandle_t handle, void* stream,
                   std::unordered_map<int64_t, void*>& pack, void* workspace) {
  cudaError_t err = cudaSuccess;
  const int best = fastest_candidate(stream, static_cast<int>(g.get_execution_plan_count()),
                                     [&](int i) {
                                       return g.execute_plan_at_index(handle, pack, workspace, i)
                                           .is_good();
                                     },
                                     err);
  cudaGetLastError();
  return best;
}

// Whether the dense layouts of x, y and the residual differ (NHWC: the channel dim innermost).
bool mixed_layouts(const AnvilConvArgs& a) {
  const auto nhwc = [](const int64_t* st, int64_t c) { return c > 1 && st[1] == 1; };
  const bool y = nhwc(a.y_stride, a.out_channels);
  return nhwc(a.x_stride, a.in_channels) != y ||
         (a.residual != nullptr && nhwc(a.residual_stride, a.out_channels) != y);
}

}  // namespace

int backend_conv(int device, void* stream, const AnvilConvArgs* args) {
  return guarded("conv", [&]() -> int {
    if (args == nullptr) return fail("conv(device=%d): null arguments", device);
    constexpr size_t kAbi5Size = offsetof(AnvilConvArgs, residual);  // before the residual
    if (args->struct_size < kAbi5Size)
      return fail("conv(device=%d): AnvilConvArgs of %u bytes, expected at least %zu (a caller "
                  "built against an older anvil_device.h)",
                  device, args->struct_size, kAbi5Size);
    AnvilConvArgs given{};  // a shorter struct (device ABI 5-6) has no residual
    std::memcpy(&given, args, std::min<size_t>(args->struct_size, sizeof given));
    given.struct_size = sizeof given;
    const AnvilConvArgs a = normalized(given);
    DeviceState* s = enter("conv", device);
    if (s == nullptr) return -1;
    if (const std::string why = precheck(a); !why.empty()) {
      fail("conv: cuDNN is not used for %s", why.c_str());
      return ANVIL_DEVICE_UNSUPPORTED;
    }
    // cuDNN 9's fused bf16 / fp16 engines computed wrong values for an NCHW input with an NHWC
    // output (H200, docs/design_notes.md): such a problem runs the plain convolution, and the
    // caller's epilogue kernel applies the rest
    const bool fused =
        a.bias != nullptr || a.residual != nullptr || a.activation != ANVIL_CONV_ACT_NONE;
    if (fused && a.dtype != kDTypeFloat32 && mixed_layouts(a)) {
      fail("conv: a fused 16-bit convolution mixing NCHW and NHWC runs unfused");
      return ANVIL_CONV_NOT_FUSED;
    }
    ConvKey key{};
    key.device = device;
    key.dtype = a.dtype;
    const int64_t dims[18] = {a.batch,      a.in_channels, a.in_h,       a.in_w,
                              a.out_channels, a.kernel_h,  a.kernel_w,   a.out_h,
                              a.out_w,      a.groups,      a.stride_h,   a.stride_w,
                              a.pad_top,    a.pad_left,    a.pad_bottom, a.pad_right,
                              a.dilation_h, a.dilation_w};
    std::memcpy(key.dims, dims, sizeof dims);
    std::memcpy(key.strides[0], a.x_stride, sizeof a.x_stride);
    std::memcpy(key.strides[1], a.w_stride, sizeof a.w_stride);
    std::memcpy(key.strides[2], a.y_stride, sizeof a.y_stride);
    if (a.residual != nullptr) std::memcpy(key.strides[3], a.residual_stride, sizeof a.y_stride);
    key.has_bias = a.bias != nullptr;
    key.has_residual = a.residual != nullptr;
    key.activation = a.activation;
    key.tf32 = a.dtype == kDTypeFloat32 && a.allow_tf32 != 0;

    cudnnHandle_t& handle = t_conv.handles[device];
    if (handle == nullptr) {
      const cudnnStatus_t st = cudnnCreate(&handle);
      if (st != CUDNN_STATUS_SUCCESS) {
        handle = nullptr;
        return fail("conv(device=%d): cudnnCreate failed: %s", device, cudnnGetErrorString(st));
      }
    }
    auto found = t_conv.plans.find(key);
    if (found == t_conv.plans.end()) {
      const bool enabled = autotune_enabled();
      const bool tune = enabled && !stream_capturing(stream);
      found = t_conv.plans
                  .emplace(key, build_plan(handle, a, enabled ? winner_of(key) : std::string(),
                                           tune))
                  .first;
    }
    Plan& plan = found->second;
    if (plan.graph == nullptr) {
      fail("conv: no cuDNN engine for %s: %s", problem_text(a).c_str(), plan.why.c_str());
      return fused ? ANVIL_CONV_NOT_FUSED : ANVIL_DEVICE_UNSUPPORTED;
    }
    // timing needs the largest engine's workspace: without it (or inside a capture, where the
    // timing's waits cannot run), the heuristic's first engine, untimed
    if (plan.tune && stream_capturing(stream)) untune(plan);
    void* workspace = nullptr;
    for (int attempt = 0; plan.workspace > 0 && workspace == nullptr; ++attempt) {
      {
        std::lock_guard<std::mutex> lock(s->blas_mu);
        workspace =
            stream_workspace(*s, device, stream, static_cast<size_t>(plan.workspace), "cuDNN");
      }
      if (workspace != nullptr) break;
      if (!plan.tune || attempt > 0) return fail("conv: %s", t_last_error.c_str());
      untune(plan);
    }
    const cudnnStatus_t st = cudnnSetStream(handle, static_cast<cudaStream_t>(stream));
    if (st != CUDNN_STATUS_SUCCESS)
      return fail("conv: cudnnSetStream failed: %s", cudnnGetErrorString(st));
    std::unordered_map<int64_t, void*> pack = {{kX, const_cast<void*>(a.x)},
                                               {kW, const_cast<void*>(a.w)},
                                               {kY, a.y}};
    if (a.bias != nullptr) pack.emplace(kBias, const_cast<void*>(a.bias));
    if (a.residual != nullptr) pack.emplace(kResidual, const_cast<void*>(a.residual));
    if (plan.tune) {  // the first execution: time every engine, keep the fastest
      plan.tune = false;
      const int64_t best = time_plans(*plan.graph, handle, stream, pack, workspace);
      std::string name;
      if (best >= 0 && plan.graph->get_plan_name_at_index(best, name).is_good()) {
        std::string chosen;
        {
          std::lock_guard<std::mutex> lock(g_winner_mu);
          chosen = g_winner.emplace(key, name).first->second;  // another thread's, if first
        }
        const int64_t at = chosen == name ? best : plan_named(*plan.graph, chosen);
        if (at >= 0 && plan.graph->get_workspace_size_plan_at_index(at, plan.workspace).is_good())
          plan.index = at;
      }
      if (plan.index < 0) untune(plan);
    }
    fe::error_t e = plan.index >= 0
                        ? plan.graph->execute_plan_at_index(handle, pack, workspace, plan.index)
                        : plan.graph->execute(handle, pack, workspace);
    if (e.is_bad()) {
      const cudaError_t ce = cudaGetLastError();
      return fail("conv: cuDNN execute failed for %s: %s%s%s", problem_text(a).c_str(),
                  e.get_message().c_str(), ce != cudaSuccess ? " (CUDA: " : "",
                  ce != cudaSuccess ? (cuda_text(ce) + ")").c_str() : "");
    }
    return 0;
  });
}

}  // namespace anvil::cuda_backend

#endif  // ANVIL_NO_CUDNN_FRONTEND
