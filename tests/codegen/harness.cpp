// The codegen test harness (see harness.h).
#include "harness.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "codegen/toolchain.h"
#include "core/error.h"
#include "ir/op_schema.h"
#include "runtime/rt_api.h"

#ifndef ANVIL_SOURCE_DIR
#define ANVIL_SOURCE_DIR "."
#endif

namespace anvil::testing {

namespace {

/// Error collector passed as run_ctx.
struct RunCtx {
  std::string error;
};

void test_parallel_for(int64_t begin, int64_t end, int64_t grain,
                       void (*fn)(void*, int64_t, int64_t), void* ctx) {
  // Serial, but in grain-sized chunks so that chunk starts are exercised.
  if (grain < 1) grain = 1;
  for (int64_t b = begin; b < end; b += grain) fn(ctx, b, std::min(end, b + grain));
}

template <typename T>
void naive_gemm(int ta, int tb, int64_t m, int64_t n, int64_t k, T alpha, const T* a, int64_t lda,
                const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double x = ta ? a[p * lda + i] : a[i * lda + p];
        const double y = tb ? b[j * ldb + p] : b[p * ldb + j];
        acc += x * y;
      }
      T& out = c[i * ldc + j];
      out = static_cast<T>(alpha * acc + (beta == T(0) ? 0.0 : beta * out));
    }
}

void test_sgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a,
                int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  naive_gemm<float>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void test_dgemm(int ta, int tb, int64_t m, int64_t n, int64_t k, double alpha, const double* a,
                int64_t lda, const double* b, int64_t ldb, double beta, double* c, int64_t ldc) {
  naive_gemm<double>(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// A tensor viewing a descriptor's memory.
Tensor from_desc(const AnvilRtTensor& d) {
  const DType dt = dtype_from_code(d.dtype);
  Shape sizes(d.sizes, d.sizes + d.ndim), strides(d.strides, d.strides + d.ndim);
  int64_t span = 1;
  bool empty = false;
  for (int i = 0; i < d.ndim; ++i) {
    if (sizes[static_cast<size_t>(i)] == 0) empty = true;
    span += (sizes[static_cast<size_t>(i)] - 1) * strides[static_cast<size_t>(i)];
  }
  if (empty) span = 0;
  auto st = Storage::wrap(d.data, static_cast<size_t>(std::max<int64_t>(span, 1)) * dtype_size(dt),
                          nullptr);
  return Tensor(st, dt, sizes, strides, 0);
}


int test_extern_call(void* run_ctx, const char* target, const AnvilRtTensor* ins, int32_t n_in,
                     const AnvilRtScalar* attrs, int32_t n_attrs, AnvilRtTensor* outs,
                     int32_t n_out) {
  auto* ctx = static_cast<RunCtx*>(run_ctx);
  try {
    const ir::OpSchema* schema = ir::find_op(target);
    const std::vector<std::string>* arg_names = passes::extern_tensor_args(target);
    if (!schema || !arg_names)
      throw Error(std::string("no extern kernel for ") + target, "test extern_call");
    ir::Node node;
    node.schema = schema;
    node.target = target;
    node.name = "extern";
    std::vector<ir::RValue> vals;
    std::map<std::string, const AnvilRtScalar*> by_name;
    for (int32_t i = 0; i < n_attrs; ++i) by_name[attrs[i].name] = &attrs[i];
    // fused_relu (a convolution followed by relu, docs/externs.md) is not an op argument.
    bool fused_relu = false;
    if (auto it = by_name.find("fused_relu"); it != by_name.end()) {
      fused_relu = it->second->i != 0;
      by_name.erase(it);
    }
    int32_t pos = 0;
    for (const auto& name : *arg_names) {
      ir::Arg a;
      a.name = name;
      if (by_name.count(name) && (name == "tensors" || name == "indices")) {
        const int64_t count = by_name[name]->i;
        std::vector<std::optional<Tensor>> list;
        for (int64_t k = 0; k < count; ++k, ++pos)
          list.push_back(ins[pos].ndim < 0 ? std::nullopt
                                           : std::optional<Tensor>(from_desc(ins[pos])));
        if (name == "tensors") {
          std::vector<Tensor> ts;
          for (auto& t : list) ts.push_back(*t);
          vals.emplace_back(ts);
        } else {
          vals.emplace_back(list);
        }
        by_name.erase(name);
      } else {
        if (pos >= n_in) throw Error("too few extern inputs", target);
        if (ins[pos].ndim < 0)
          vals.emplace_back(std::monostate{});
        else
          vals.emplace_back(from_desc(ins[pos]));
        ++pos;
      }
      node.args.push_back(a);
    }
    for (const auto& [name, s] : by_name) {
      ir::Arg a;
      a.name = name;
      node.args.push_back(a);
      switch (s->kind) {
        case 0:
          if (name == "dtype")
            vals.emplace_back(dtype_from_code(s->i));
          else
            vals.emplace_back(static_cast<int64_t>(s->i));
          break;
        case 1:
          vals.emplace_back(s->f);
          break;
        case 2:
          vals.emplace_back(std::string(s->s));
          break;
        default:
          vals.emplace_back(std::vector<int64_t>(s->ints, s->ints + s->n_ints));
          break;
      }
    }
    ir::KernelContext kc(node, std::move(vals));
    auto results = schema->kernel(kc);
    if (results.size() == 1 && n_out > 1)
      if (auto* l = std::get_if<std::vector<Tensor>>(&results[0])) {
        std::vector<ir::RValue> flat(l->begin(), l->end());
        results = flat;
      }
    for (int32_t o = 0; o < n_out; ++o) {
      Tensor dst = from_desc(outs[o]);
      Tensor r = std::get<Tensor>(results.at(static_cast<size_t>(o)));
      if (fused_relu) {
        std::vector<double> v = r.to_doubles();
        for (double& e : v) e = e < 0 ? 0 : e;
        r = Tensor::from_vector(v, r.sizes()).to(r.dtype(), /*copy=*/true);
      }
      dst.copy_from(r);
    }
    return 0;
  } catch (const std::exception& e) {
    if (ctx->error.empty()) ctx->error = e.what();
    return 1;
  }
}

void test_set_error(void* run_ctx, const char* message) {
  auto* ctx = static_cast<RunCtx*>(run_ctx);
  if (ctx->error.empty()) ctx->error = message;
}

/// GEMMs with a constant B go through the runtime's packed kernel (packed on every call: the
/// harness keeps no constant cache), so every generated-code test exercises it.
void test_sgemm_const_b(void*, int ta, int tb, int64_t m, int64_t n, int64_t k, float alpha,
                        const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                        int64_t ldc) {
  runtime::sgemm_const_b(nullptr, ta != 0, tb != 0, m, n, k, alpha, a, lda, b, ldb, c, ldc);
}

// Minor version 2 without collective services (a model with collectives fails to create).
const AnvilRtApi kApi = {ANVIL_MODEL_ABI_VERSION,
                         test_parallel_for,
                         test_sgemm,
                         test_dgemm,
                         test_extern_call,
                         test_set_error,
                         2,
                         nullptr,
                         nullptr,
                         test_sgemm_const_b};

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

LoadedModel::LoadedModel(const AnvilModelEntry* entry, codegen::CpuCodegenResult gen,
                         const passes::Program*)
    : entry_(entry), gen_(std::move(gen)) {
  ANVIL_CHECK(entry_ && entry_->abi_version == ANVIL_MODEL_ABI_VERSION, "LoadedModel",
              "bad entry table", "abi 1", "other");
  model_ = entry_->create(&kApi);
  ANVIL_CHECK(model_ != nullptr, "LoadedModel", "create() failed", "a model", "null");
  for (const auto& c : gen_.constants) constants_.push_back(c.tensor.clone());
}

LoadedModel::~LoadedModel() {
  if (model_) entry_->destroy(model_);
}

std::vector<Tensor> LoadedModel::run(const std::vector<Tensor>& inputs) {
  const auto m = nlohmann::json::parse(gen_.manifest_json);
  std::vector<std::string> symbols;
  for (const auto& s : m["symbols"]) symbols.push_back(s["name"].get<std::string>());
  auto parse_sizes = [](const nlohmann::json& a) {
    std::vector<SymInt> out;
    for (const auto& v : a)
      out.push_back(v.is_number() ? SymInt(v.get<int64_t>()) : SymInt::parse(v.get<std::string>()));
    return out;
  };
  const auto& ins = m["inputs"];
  ANVIL_CHECK(ins.size() == inputs.size(), "LoadedModel::run", "wrong number of inputs",
              std::to_string(ins.size()), std::to_string(inputs.size()));
  SymEnv env;
  std::vector<Tensor> contig;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto sizes = parse_sizes(ins[i]["sizes"]);
    ANVIL_CHECK(sizes.size() == static_cast<size_t>(inputs[i].dim()), "LoadedModel::run",
                "wrong rank", std::to_string(sizes.size()), std::to_string(inputs[i].dim()));
    for (size_t d = 0; d < sizes.size(); ++d)
      if (auto s = sizes[d].as_symbol(); s && !env.count(*s))
        env[*s] = inputs[i].size(static_cast<int64_t>(d));
    ANVIL_CHECK(dtype_name(inputs[i].dtype()) == ins[i]["dtype"].get<std::string>(),
                "LoadedModel::run", "wrong dtype", ins[i]["dtype"].get<std::string>(),
                dtype_name(inputs[i].dtype()));
    contig.push_back(inputs[i].contiguous());
  }
  std::vector<int64_t> sym;
  for (const auto& s : symbols) {
    ANVIL_CHECK(env.count(s), "LoadedModel::run", "unbound symbol", "a value", s);
    sym.push_back(env[s]);
  }
  std::vector<Tensor> outs;
  std::vector<void*> out_ptrs;
  const auto& os = m["outputs"];
  for (size_t i = 0; i < os.size(); ++i) {
    const size_t rank = os[i]["sizes"].size();
    Shape sizes(rank, 0);
    entry_->output_sizes(sym.data(), static_cast<int32_t>(i), sizes.data());
    const DType dtype = dtype_from_name(os[i]["dtype"].get<std::string>());
    if (entry_->abi_version < 2 || !entry_->output_layout) {
      outs.push_back(Tensor::empty(sizes, dtype));
      out_ptrs.push_back(outs.back().data_ptr());
      continue;
    }
    // Outputs view their own storage, an earlier output's storage or an input (anvil_rt.h).
    AnvilRtOutputLayout l{};
    entry_->output_layout(sym.data(), static_cast<int32_t>(i), &l);
    Tensor base = l.base_kind == 0   ? Tensor::empty({l.storage_numel}, dtype)
                  : l.base_kind == 1 ? outs.at(static_cast<size_t>(l.base_index))
                                     : contig.at(static_cast<size_t>(l.base_index));
    out_ptrs.push_back(base.data_ptr());
    const int64_t start = l.base_kind == 2 ? base.storage_offset() : 0;  // outputs: storage start
    base = Tensor(base.storage(), dtype, {1}, {1}, 0);
    outs.push_back(base.as_strided(sizes, Shape(l.strides, l.strides + rank), start + l.offset));
  }
  const int64_t arena_bytes = entry_->arena_bytes(sym.data());
  auto arena = Storage::allocate(static_cast<size_t>(std::max<int64_t>(arena_bytes, 64)));
  std::vector<void*> in_ptrs, cst_ptrs;
  for (auto& t : contig) in_ptrs.push_back(t.data_ptr());
  for (auto& t : constants_) cst_ptrs.push_back(t.data_ptr());
  RunCtx ctx;
  AnvilRunArgs args{sym.data(),      in_ptrs.data(), out_ptrs.data(),
                    cst_ptrs.data(), arena->data(),  &ctx};
  const int rc = entry_->run(model_, &args);
  if (rc != 0) throw Error("generated run() failed: " + ctx.error, "LoadedModel::run");
  return outs;
}

TestLibrary::~TestLibrary() {
  models_.clear();
  if (handle_) dlclose(handle_);
}

std::unique_ptr<TestLibrary> build_library(
    const std::vector<std::pair<std::string, const ir::Graph*>>& graphs,
    const codegen::CpuCodegenOptions& base, int merge_into) {
  char tmpl[] = "/tmp/anvil_codegen_XXXXXX";
  const char* dir = mkdtemp(tmpl);
  ANVIL_CHECK(dir != nullptr, "build_library", "cannot create a temporary directory", "a dir",
              "none");
  const std::string d = dir;
  std::vector<codegen::CpuCodegenResult> gens;
  std::vector<codegen::SourceFile> files;
  std::vector<std::string> flags;
  std::vector<std::string> merged(static_cast<size_t>(std::max(merge_into, 0)));
  size_t next = 0;
  for (const auto& [name, g] : graphs) {
    codegen::CpuCodegenOptions o = base;
    o.cpp_namespace = "m_" + name;
    o.entry_symbol = "entry_" + name;
    gens.push_back(codegen::generate_cpu(*g, o));
    flags = gens.back().compile_flags;
    for (const auto& src : gens.back().sources) {
      if (!merged.empty()) {
        merged[next++ % merged.size()] += src.text + "\n";
        continue;
      }
      files.push_back({name + "_" + src.filename, src.text, {}, ""});
    }
  }
  for (size_t i = 0; i < merged.size(); ++i)
    if (!merged[i].empty())
      files.push_back({"merged_" + std::to_string(i) + ".cpp", merged[i], {}, ""});
  // Through the toolchain's object cache in a folder the test processes share: CTest runs each
  // test of a suite in a process of its own, and a suite's SetUpTestSuite builds the same
  // library in each, so every process after the first links (or copies) cached objects. The
  // keys hold the compiler's identity, the flags, anvil_rt.h and the source text.
  codegen::ToolchainOptions t;
  t.target = base.target;
  t.opt_level = "-O2";
  t.extra_flags = flags;
  if (const char* extra = std::getenv("ANVIL_TEST_CXXFLAGS")) {
    std::istringstream words(extra);
    for (std::string w; words >> w;) t.extra_flags.push_back(w);
  }
  t.include_dir = std::string(ANVIL_SOURCE_DIR) + "/include";
  t.cache_dir = test_cache_dir();
  t.jobs = 2;
  t.progress = codegen::ProgressMode::kQuiet;
  if (std::getenv("ANVIL_KEEP_TEST_BUILD")) t.build_dir = d + "/src";
  codegen::build_shared_library(files, d + "/lib.so", t);
  auto lib = std::make_unique<TestLibrary>();
  lib->handle_ = dlopen((d + "/lib.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  ANVIL_CHECK(lib->handle_ != nullptr, "build_library", "dlopen failed", "a library", dlerror());
  for (size_t i = 0; i < graphs.size(); ++i) {
    const std::string sym = "entry_" + graphs[i].first;
    auto fn = reinterpret_cast<AnvilModelEntryFn>(dlsym(lib->handle_, sym.c_str()));
    ANVIL_CHECK(fn != nullptr, "build_library", "missing entry symbol", sym, "none");
    lib->models_[graphs[i].first] =
        std::make_unique<LoadedModel>(fn(), std::move(gens[i]), nullptr);
  }
  if (!std::getenv("ANVIL_KEEP_TEST_BUILD")) std::system(("rm -rf " + d).c_str());
  return lib;
}

std::string test_cache_dir() {
  if (const char* env = std::getenv("ANVIL_TEST_CACHE_DIR"); env && *env) return env;
#ifdef ANVIL_CLI
  // <build>/bin/anvil -> <build>/test_cache/codegen (the CLI suite keeps test_cache/cli)
  const auto build = std::filesystem::path(ANVIL_CLI).parent_path().parent_path();
  return (build / "test_cache" / "codegen").string();
#else
  return (std::filesystem::temp_directory_path() / "anvil_test_cache").string();
#endif
}

Tensor complex_parts(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  Shape sizes = t.sizes(), strides = t.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor(t.storage(), complex_to_real(t.dtype()), sizes, strides, t.storage_offset() * 2);
}

double rel_error(const Tensor& got, const Tensor& want) {
  ANVIL_CHECK(got.sizes() == want.sizes(), "rel_error", "shape mismatch", shape_str(want.sizes()),
              shape_str(got.sizes()));
  const auto a = complex_parts(got).to_doubles(), b = complex_parts(want).to_doubles();
  double scale = 1, err = 0;
  for (double v : b)
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (std::isinf(b[i]) && a[i] == b[i]) continue;
    const double e = std::fabs(a[i] - b[i]);
    err = std::max(err, std::isnan(e) ? INFINITY : e);
  }
  return err / scale;
}

Tensor random_tensor(const Shape& sizes, DType dtype, uint64_t seed) {
  const bool cx = is_complex(dtype);  // both parts random, like floats
  Tensor t = Tensor::empty(sizes, cx ? DType::kComplex128 : DType::kFloat64);
  double* p = static_cast<double*>(t.data_ptr());
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (int64_t i = 0; i < t.numel() * (cx ? 2 : 1); ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const double u = static_cast<double>(s >> 11) / static_cast<double>(1ull << 53);
    if (is_floating(dtype) || cx)
      p[i] = 4 * u - 2;
    else if (dtype == DType::kBool)
      p[i] = u < 0.5 ? 0 : 1;
    else
      p[i] = std::floor(5 * u);
  }
  return t.to(dtype);
}

}  // namespace anvil::testing
