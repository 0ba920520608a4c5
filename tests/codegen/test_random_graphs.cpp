// Randomized differential test: 240 generated graphs of pointwise, reduction, view and matrix
// ops with random shapes (views make random strides, broadcasting makes stride 0) are compiled
// into a few shared libraries and must match the interpreter within 1e-4 (ints exactly).
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <random>
#include <sstream>

#include "harness.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace anvil {
namespace {

using Dims = std::vector<int64_t>;

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

/// Writes one random graph in the text IR.
class GraphGen {
 public:
  explicit GraphGen(uint64_t seed) : rng_(seed) {}

  std::string make() {
    const bool ints = pick(10) == 0;  // some graphs compute in int64
    dtype_ = ints ? "i64" : "f32";
    const int n_in = 1 + pick(2);
    for (int i = 0; i < n_in; ++i) add_input(random_dims(1 + pick(4)));
    const int n_ops = 3 + pick(7);
    for (int k = 0; k < n_ops; ++k) step(ints);
    std::ostringstream os;
    os << "graph {\n  inputs {\n" << inputs_.str() << "  }\n" << body_.str() << "  outputs {\n";
    os << "    user_output %" << vals_.back().name << "\n";
    if (vals_.size() > 3 && pick(2))
      os << "    user_output %" << vals_[vals_.size() / 2].name << "\n";
    os << "  }\n}\n";
    return os.str();
  }

 private:
  struct Val {
    std::string name;
    Dims dims;
  };

  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  Dims random_dims(int rank) {
    Dims d;
    for (int i = 0; i < rank; ++i) d.push_back(1 + pick(5));
    return d;
  }
  /// A value to build on: usually a recent one (deep chains), sometimes any.
  const Val& any() {
    const int n = static_cast<int>(vals_.size());
    if (pick(10) < 7) return vals_[static_cast<size_t>(n - 1 - pick(std::min(n, 3)))];
    return vals_[static_cast<size_t>(pick(n))];
  }
  void add_input(const Dims& d) {
    const std::string n = "in" + std::to_string(n_in_++);
    inputs_ << "    %" << n << ": " << dtype_ << dims_str(d) << " = user_input\n";
    vals_.push_back({n, d});
  }
  std::string param(const Dims& d) {
    const std::string n = "p" + std::to_string(n_param_++);
    inputs_ << "    %" << n << ": " << dtype_ << dims_str(d) << " = parameter \"" << n << "\"\n";
    return n;
  }
  void emit(const Dims& d, const std::string& rhs, const std::string& dtype = "") {
    const std::string n = "v" + std::to_string(n_val_++);
    body_ << "  %" << n << ": " << (dtype.empty() ? dtype_ : dtype) << dims_str(d) << " = " << rhs
          << "\n";
    vals_.push_back({n, d});
  }
  /// A shape that broadcasts to d: some dims 1, maybe fewer leading dims.
  Dims broadcastable(const Dims& d) {
    Dims b;
    const size_t drop = d.empty() ? 0 : static_cast<size_t>(pick(static_cast<int>(d.size())));
    for (size_t i = drop; i < d.size(); ++i) b.push_back(pick(3) == 0 ? 1 : d[i]);
    return b;
  }

  void step(bool ints) {
    const Val x = any();
    const Dims& d = x.dims;
    const std::string s = "%" + x.name;
    const int r = static_cast<int>(d.size());
    switch (pick(ints ? 7 : 11)) {
      case 0: {  // binary with broadcasting against a parameter or another value
        const char* ops[] = {"add.Tensor", "sub.Tensor", "mul.Tensor", "maximum.default"};
        const char* op = ops[pick(4)];
        std::string other;
        const Val* same = nullptr;
        for (const Val& v : vals_)
          if (v.dims == d && v.name != x.name) same = &v;
        if (same && pick(2))
          other = "%" + same->name;
        else
          other = "%" + param(broadcastable(d));
        emit(d, std::string("aten.") + op + "(self=" + s + ", other=" + other + ")");
        return;
      }
      case 1: {  // scalar arithmetic
        const char* ops[] = {"add.Tensor", "mul.Tensor", "sub.Tensor"};
        emit(d, std::string("aten.") + ops[pick(3)] + "(self=" + s + ", other=" +
                    (ints ? std::to_string(pick(5) - 2) : std::to_string(pick(7) - 3) + ".5") +
                    ")");
        return;
      }
      case 2: {  // reduction
        if (r == 0) return;
        std::vector<int> dims;
        for (int k = 0; k < r; ++k)
          if (pick(2)) dims.push_back(k);
        if (dims.empty()) dims.push_back(pick(r));
        const bool keep = pick(2);
        Dims out;
        for (int k = 0; k < r; ++k) {
          const bool red = std::find(dims.begin(), dims.end(), k) != dims.end();
          if (!red)
            out.push_back(d[static_cast<size_t>(k)]);
          else if (keep)
            out.push_back(1);
        }
        std::string dl = "[";
        for (size_t k = 0; k < dims.size(); ++k) dl += (k ? ", " : "") + std::to_string(dims[k]);
        dl += "]";
        const char* ops[] = {"sum.dim_IntList", "amax.default", "mean.dim"};
        const int which = pick(ints ? 2 : 3);
        emit(out, std::string("aten.") + ops[which] + "(self=" + s + ", dim=" + dl +
                      ", keepdim=" + (keep ? "True" : "False") + ")");
        return;
      }
      case 3: {  // permute / transpose
        if (r < 2) return;
        std::vector<int> perm(static_cast<size_t>(r));
        for (int k = 0; k < r; ++k) perm[static_cast<size_t>(k)] = k;
        std::shuffle(perm.begin(), perm.end(), rng_);
        Dims out;
        std::string pl = "[";
        for (int k = 0; k < r; ++k) {
          out.push_back(d[static_cast<size_t>(perm[static_cast<size_t>(k)])]);
          pl += (k ? ", " : "") + std::to_string(perm[static_cast<size_t>(k)]);
        }
        emit(out, "aten.permute.default(self=" + s + ", dims=" + pl + "])");
        return;
      }
      case 4: {  // slice with a step
        if (r == 0) return;
        const int k = pick(r);
        const int64_t n = d[static_cast<size_t>(k)];
        const int64_t start = pick(static_cast<int>(n)), step = 1 + pick(2);
        Dims out = d;
        out[static_cast<size_t>(k)] = (n - start + step - 1) / step;
        emit(out, "aten.slice.Tensor(self=" + s + ", dim=" + std::to_string(k) +
                      ", start=" + std::to_string(start) +
                      ", end=9223372036854775807, step=" + std::to_string(step) + ")");
        return;
      }
      case 5: {  // reshape: merge two adjacent dims, or split one
        if (r >= 2 && pick(2)) {
          const int k = pick(r - 1);
          Dims out;
          for (int i = 0; i < r; ++i) {
            if (i == k + 1) continue;
            out.push_back(i == k ? d[static_cast<size_t>(k)] * d[static_cast<size_t>(k + 1)]
                                 : d[static_cast<size_t>(i)]);
          }
          emit(out, "aten.reshape.default(self=" + s + ", shape=" + dims_str(out) + ")");
        } else {
          Dims out = d;
          out.insert(out.begin() + pick(r + 1), 1);
          emit(out, "aten.view.default(self=" + s + ", size=" + dims_str(out) + ")");
        }
        return;
      }
      case 6: {  // expand a size-1 dim or unsqueeze + expand
        Dims out = d;
        bool any1 = false;
        for (auto& v : out)
          if (v == 1 && pick(2)) {
            v = 2 + pick(3);
            any1 = true;
          }
        if (!any1) out.insert(out.begin(), 2);
        emit(out, "aten.expand.default(self=" + s + ", size=" + dims_str(out) + ")");
        return;
      }
      case 7: {  // unary math
        const char* ops[] = {"tanh", "sigmoid", "neg", "abs", "relu", "sin", "exp"};
        std::string op = ops[pick(7)];
        if (op == "exp") {  // keep values small
          emit(d, "aten.tanh.default(self=" + s + ")");
          emit(d, "aten.exp.default(self=%" + vals_.back().name + ")");
          return;
        }
        emit(d, "aten." + op + ".default(self=" + s + ")");
        return;
      }
      case 8: {  // softmax
        if (r == 0) return;
        emit(d, "aten.softmax.int(self=" + s +
                    ", dim=" + std::to_string(pick(r) - (pick(2) ? r : 0)) + ")");
        return;
      }
      case 9: {  // matmul / linear with a parameter
        if (r == 0) return;
        const int64_t k = d.back(), n = 1 + pick(6);
        Dims out = d;
        out.back() = n;
        if (pick(2)) {
          const std::string w = param({k, n});
          emit(out, "aten.matmul.default(self=" + s + ", other=%" + w + ")");
        } else {
          const std::string w = param({n, k}), b = param({n});
          emit(out, "aten.linear.default(input=" + s + ", weight=%" + w + ", bias=%" + b + ")");
        }
        return;
      }
      case 10: {  // batched matmul of a value with its transpose
        if (r < 2) return;
        Dims t = d;
        std::swap(t[static_cast<size_t>(r - 1)], t[static_cast<size_t>(r - 2)]);
        emit(t, "aten.transpose.int(self=" + s + ", dim0=-1, dim1=-2)");
        const std::string tn = vals_.back().name;
        Dims out = d;
        out.back() = d[static_cast<size_t>(r - 2)];
        emit(out, "aten.matmul.default(self=" + s + ", other=%" + tn + ")");
        return;
      }
    }
  }

  std::mt19937_64 rng_;
  std::string dtype_;
  std::ostringstream inputs_, body_;
  std::vector<Val> vals_;
  int n_in_ = 0, n_param_ = 0, n_val_ = 0;
};

constexpr int kGraphs = 240;
constexpr int kLibraries = 4;

TEST(RandomGraphs, MatchTheInterpreter) {
  int checked = 0;
  for (int lib = 0; lib < kLibraries; ++lib) {
    std::vector<std::unique_ptr<ir::Graph>> graphs;
    std::vector<std::pair<std::string, const ir::Graph*>> list;
    std::vector<std::string> texts;
    for (int i = lib * kGraphs / kLibraries; i < (lib + 1) * kGraphs / kLibraries; ++i) {
      const std::string text = GraphGen(1000 + static_cast<uint64_t>(i)).make();
      if (std::getenv("ANVIL_PRINT_RANDOM_GRAPHS")) std::cout << text;
      auto g = ir::parse_graph(text);
      ASSERT_NO_THROW(ir::verify(*g)) << text;
      uint64_t seed = 50 + static_cast<uint64_t>(i) * 10;
      for (const auto& spec : g->input_specs())
        if (spec.kind != ir::InputKind::kUserInput) {
          Shape sizes;
          for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
          g->constants[spec.target] = testing::random_tensor(sizes, spec.value->type.dtype, seed++);
        }
      list.emplace_back("g" + std::to_string(i), g.get());
      texts.push_back(text);
      graphs.push_back(std::move(g));
    }
    codegen::CpuCodegenOptions o;
    o.num_translation_units = 1;
    o.parallel_min_work = 8;
    std::unique_ptr<testing::TestLibrary> built;
    ASSERT_NO_THROW(built = testing::build_library(list, o, 4));
    for (size_t k = 0; k < list.size(); ++k) {
      const ir::Graph& g = *list[k].second;
      std::vector<Tensor> ins;
      uint64_t seed = 7 + k;
      for (const auto& spec : g.input_specs()) {
        if (spec.kind != ir::InputKind::kUserInput) continue;
        Shape sizes;
        for (const auto& s : spec.value->type.sizes) sizes.push_back(s.constant());
        ins.push_back(testing::random_tensor(sizes, spec.value->type.dtype, seed++));
      }
      interp::Interpreter ref(g);
      const auto want = ref.run(ins);
      std::vector<Tensor> got;
      ASSERT_NO_THROW(got = built->model(list[k].first).run(ins)) << texts[k];
      ASSERT_EQ(got.size(), want.size()) << texts[k];
      for (size_t o2 = 0; o2 < got.size(); ++o2) {
        const double tol = is_floating(want[o2].dtype()) ? 1e-4 : 0.0;
        EXPECT_LE(testing::rel_error(got[o2], want[o2]), tol)
            << list[k].first << " output " << o2 << "\n"
            << texts[k];
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, kGraphs);
}

}  // namespace
}  // namespace anvil
