// AnvilDeviceApi::attention: scaled-dot-product attention through cuDNN's fused attention
// (the frontend's sdpa node, built into an execution plan with the graph API).
//
// Plans are cached per thread, as PyTorch does: a cuDNN handle carries the stream it launches
// on, and an executed frontend graph keeps per-call state, so neither is shared between threads
// that run models concurrently. A problem no engine takes is remembered as unsupported (with the
// reason) and answered ANVIL_DEVICE_UNSUPPORTED at once; the generated code then runs its own
// kernel. Workspace comes from the stream's (cuda_gemm.cpp's stream_workspace), which work on
// that stream is ordered with.
#include <cudnn.h>

#include "cuda_backend_internal.h"

#ifdef ANVIL_NO_CUDNN_FRONTEND  // configured without the frontend's headers (CMakeLists.txt)

namespace anvil::cuda_backend {

int backend_attention(int device, void* stream, const AnvilAttentionArgs* args) {
  (void)device, (void)stream, (void)args;
  fail("attention: this build of libanvil_cuda has no cuDNN frontend (its headers could not be "
       "fetched at configure time): anvil's own attention kernels run");
  return ANVIL_DEVICE_UNSUPPORTED;
}

}  // namespace anvil::cuda_backend

#else

#include <cudnn_frontend.h>

#include <cinttypes>
#include <cstring>
#include <map>
#include <memory>
#include <unordered_map>

namespace anvil::cuda_backend {

namespace {

namespace fe = cudnn_frontend;

enum Uid : int64_t { kQ = 1, kK, kV, kO, kBias };

// Everything a plan depends on: the problem (pointers only through their alignment).
struct AttnKey {
  int device;
  int32_t dtype, causal;
  int64_t dims[7];
  uint32_t scale_bits;
  int64_t strides[4][4];
  int32_t has_bias;
  int64_t bias_size[4], bias_stride[4];
  auto operator<=>(const AttnKey&) const = default;
};

struct Plan {
  std::shared_ptr<fe::graph::Graph> graph;  // null: unsupported
  std::string why;                          // the reason, when unsupported
  int64_t workspace = 0;
};

// The calling thread's handles (one per device) and plans.
struct ThreadState {
  std::unordered_map<int, cudnnHandle_t> handles;
  std::map<AttnKey, Plan> plans;
  ~ThreadState() {
    for (auto& [device, h] : handles) {
      if (cudaSetDevice(device) == cudaSuccess) cudnnDestroy(h);
    }
  }
};
thread_local ThreadState t_dnn;

std::string dnn_text(cudnnStatus_t s) { return cudnnGetErrorString(s); }

std::vector<int64_t> vec4(const int64_t* v) { return {v[0], v[1], v[2], v[3]}; }

// The plan of `a` built with `handle`, or the reason none applies (Plan::graph null).
Plan build_plan(cudnnHandle_t handle, const AnvilAttentionArgs& a) {
  Plan p;
  const fe::DataType_t io =
      a.dtype == kDTypeBFloat16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF;
  auto g = std::make_shared<fe::graph::Graph>();
  g->set_io_data_type(io)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  const auto tensor = [&](const char* name, Uid uid, std::vector<int64_t> dims,
                          const int64_t* stride) {
    return g->tensor(fe::graph::Tensor_attributes()
                         .set_name(name)
                         .set_uid(uid)
                         .set_dim(std::move(dims))
                         .set_stride(vec4(stride)));
  };
  auto q = tensor("Q", kQ, {a.batch, a.heads, a.len_q, a.head_dim}, a.q_stride);
  auto k = tensor("K", kK, {a.batch, a.kv_heads, a.len_kv, a.head_dim}, a.k_stride);
  auto v = tensor("V", kV, {a.batch, a.kv_heads, a.len_kv, a.head_dim_v}, a.v_stride);
  auto opts = fe::graph::SDPA_attributes()
                  .set_name("anvil_attention")
                  .set_generate_stats(false)
                  .set_attn_scale(a.scale)
                  .set_causal_mask(a.causal != 0);
  if (a.bias != nullptr) opts.set_bias(tensor("Bias", kBias, vec4(a.bias_size), a.bias_stride));
  auto [o, stats] = g->sdpa(q, k, v, opts);
  (void)stats;
  o->set_output(true)
      .set_uid(kO)
      .set_dim({a.batch, a.heads, a.len_q, a.head_dim_v})
      .set_stride(vec4(a.o_stride));
  const auto step = [&](const char* what, fe::error_t e) {
    if (e.is_good()) return true;
    p.why = format("cuDNN %s: %s", what, e.get_message().c_str());
    return false;
  };
  if (!step("validate", g->validate()) ||
      !step("build_operation_graph", g->build_operation_graph(handle)) ||
      !step("create_execution_plans", g->create_execution_plans({fe::HeurMode_t::A})) ||
      !step("check_support", g->check_support(handle)) ||
      !step("build_plans", g->build_plans(handle)) ||
      !step("get_workspace_size", g->get_workspace_size(p.workspace)))
    return p;
  p.graph = std::move(g);
  return p;
}

// Why the problem is outside what this entry point takes, or "" (before asking cuDNN).
std::string precheck(const AnvilAttentionArgs& a) {
  if (a.dtype != kDTypeBFloat16 && a.dtype != kDTypeFloat16)
    return format("dtype code %d (cuDNN attention takes bfloat16 and float16)", a.dtype);
  if (a.batch <= 0 || a.heads <= 0 || a.kv_heads <= 0 || a.len_q <= 0 || a.len_kv <= 0 ||
      a.head_dim <= 0 || a.head_dim_v <= 0)
    return "an empty or negative size";
  if (a.heads % a.kv_heads != 0)
    return format("%" PRId64 " query heads are not a multiple of %" PRId64 " key/value heads",
                  a.heads, a.kv_heads);
  const int64_t* strides[4] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
  const void* ptrs[4] = {a.q, a.k, a.v, a.o};
  const char* names[4] = {"q", "k", "v", "o"};
  for (int t = 0; t < 4; ++t) {
    if (strides[t][3] != 1) return format("%s is not contiguous in its last dim", names[t]);
    for (int d = 0; d < 3; ++d)
      if (strides[t][d] % 8 != 0)
        return format("stride %d of %s (%" PRId64 ") is not a multiple of 8", d, names[t],
                      strides[t][d]);
    if (reinterpret_cast<uintptr_t>(ptrs[t]) % 16 != 0)
      return format("%s is not 16-byte aligned", names[t]);
  }
  if (a.bias != nullptr) {
    if (a.bias_size[2] != a.len_q || a.bias_size[3] != a.len_kv)
      return "a mask broadcast over query or key positions";
    if (reinterpret_cast<uintptr_t>(a.bias) % 16 != 0 || a.bias_stride[3] != 1)
      return "a mask not 16-byte aligned or not contiguous in its last dim";
  }
  return "";
}

// `a` with the strides of its size-1 dims made the packed ones (a view's stride there is
// arbitrary: cuDNN checks it all the same).
AnvilAttentionArgs normalized(const AnvilAttentionArgs& a) {
  AnvilAttentionArgs n = a;
  const int64_t q[4] = {a.batch, a.heads, a.len_q, a.head_dim};
  const int64_t k[4] = {a.batch, a.kv_heads, a.len_kv, a.head_dim};
  const int64_t v[4] = {a.batch, a.kv_heads, a.len_kv, a.head_dim_v};
  const int64_t o[4] = {a.batch, a.heads, a.len_q, a.head_dim_v};
  const struct {
    const int64_t* size;
    int64_t* stride;
  } ts[5] = {{q, n.q_stride}, {k, n.k_stride}, {v, n.v_stride}, {o, n.o_stride},
             {n.bias_size, n.bias_stride}};
  for (const auto& t : ts) {
    if (t.size[3] == 1) t.stride[3] = 1;
    for (int d = 2; d >= 0; --d)
      if (t.size[d] == 1) t.stride[d] = t.stride[d + 1] * t.size[d + 1];
  }
  return n;
}

}  // namespace

int backend_attention(int device, void* stream, const AnvilAttentionArgs* args) {
  return guarded("attention", [&]() -> int {
    if (args == nullptr) return fail("attention(device=%d): null arguments", device);
    const AnvilAttentionArgs a = normalized(*args);
    DeviceState* s = enter("attention", device);
    if (s == nullptr) return -1;
    if (const std::string why = precheck(a); !why.empty()) {
      fail("attention: cuDNN is not used for %s", why.c_str());
      return ANVIL_DEVICE_UNSUPPORTED;
    }
    AttnKey key{};
    key.device = device;
    key.dtype = a.dtype;
    key.causal = a.causal != 0;
    const int64_t dims[7] = {a.batch,  a.heads,    a.kv_heads,  a.len_q,
                             a.len_kv, a.head_dim, a.head_dim_v};
    std::memcpy(key.dims, dims, sizeof dims);
    std::memcpy(&key.scale_bits, &a.scale, sizeof key.scale_bits);
    const int64_t* strides[4] = {a.q_stride, a.k_stride, a.v_stride, a.o_stride};
    for (int t = 0; t < 4; ++t) std::memcpy(key.strides[t], strides[t], 4 * sizeof(int64_t));
    key.has_bias = a.bias != nullptr;
    if (key.has_bias) {
      std::memcpy(key.bias_size, a.bias_size, sizeof key.bias_size);
      std::memcpy(key.bias_stride, a.bias_stride, sizeof key.bias_stride);
    }

    cudnnHandle_t& handle = t_dnn.handles[device];
    if (handle == nullptr) {
      const cudnnStatus_t st = cudnnCreate(&handle);
      if (st != CUDNN_STATUS_SUCCESS) {
        handle = nullptr;
        return fail("attention(device=%d): cudnnCreate failed: %s", device, dnn_text(st).c_str());
      }
    }
    auto found = t_dnn.plans.find(key);
    if (found == t_dnn.plans.end()) found = t_dnn.plans.emplace(key, build_plan(handle, a)).first;
    const Plan& plan = found->second;
    if (plan.graph == nullptr) {
      fail("attention: no cuDNN engine for B=%" PRId64 " H=%" PRId64 " Hkv=%" PRId64
           " L=%" PRId64 " S=%" PRId64 " E=%" PRId64 " Ev=%" PRId64 ": %s",
           a.batch, a.heads, a.kv_heads, a.len_q, a.len_kv, a.head_dim, a.head_dim_v,
           plan.why.c_str());
      return ANVIL_DEVICE_UNSUPPORTED;
    }
    void* workspace = nullptr;
    if (plan.workspace > 0) {
      std::lock_guard<std::mutex> lock(s->blas_mu);
      workspace =
          stream_workspace(*s, device, stream, static_cast<size_t>(plan.workspace), "cuDNN");
      if (workspace == nullptr) return fail("attention: %s", t_last_error.c_str());
    }
    cudnnStatus_t st = cudnnSetStream(handle, static_cast<cudaStream_t>(stream));
    if (st != CUDNN_STATUS_SUCCESS)
      return fail("attention: cudnnSetStream failed: %s", dnn_text(st).c_str());
    std::unordered_map<int64_t, void*> pack = {{kQ, const_cast<void*>(a.q)},
                                               {kK, const_cast<void*>(a.k)},
                                               {kV, const_cast<void*>(a.v)},
                                               {kO, a.o}};
    if (a.bias != nullptr) pack.emplace(kBias, const_cast<void*>(a.bias));
    fe::error_t e = plan.graph->execute(handle, pack, workspace);
    if (e.is_bad()) {
      const cudaError_t ce = cudaGetLastError();
      return fail("attention: cuDNN execute failed: %s%s%s", e.get_message().c_str(),
                  ce != cudaSuccess ? " (CUDA: " : "",
                  ce != cudaSuccess ? (cuda_text(ce) + ")").c_str() : "");
    }
    return 0;
  });
}

}  // namespace anvil::cuda_backend

#endif  // ANVIL_NO_CUDNN_FRONTEND
