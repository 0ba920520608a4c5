// Losses: cross_entropy_loss (the target torch.export keeps for F.cross_entropy). Shape rule and
// reference kernel with torch's formulas (aten/src/ATen/native/LossNLL.cpp):
//  - class-index targets (integer, self's shape without the class dim 1; a 0-d target for a 1-d
//    input): loss_i = -w[t_i] * log_softmax(self)[i, t_i], 0 where t_i == ignore_index; mean
//    divides the sum by the sum of w[t_i] over the targets that are not ignored (0/0 gives NaN);
//    label smoothing ls mixes in the uniform term: (1 - ls) * nll + ls / C * smooth, where
//    smooth_i = -sum_c w[c] * log_softmax[i, c] (0 for ignored targets) reduced the same way;
//  - probability targets (floating, self's shape): t' = t * (1 - ls) + ls / C,
//    loss_i = -sum_c w[c] * t'[i, c] * log_softmax[i, c]; mean divides by numel / C.
// The class dim is 1 (0 for a 1-d input). Everything computes in double and rounds once to
// self's dtype.
#include <cmath>
#include <optional>

#include "core/error.h"
#include "ops/registry.h"

namespace anvil::ops {

namespace {

using ir::KernelContext;
using ir::Node;
using ir::RValue;
using ir::TensorType;
namespace sa = ir::shape_args;

constexpr int64_t kReductionNone = 0;
constexpr int64_t kReductionMean = 1;
constexpr int64_t kReductionSum = 2;

/// Checks a reduction code (0 none, 1 mean, 2 sum); `fail` reports an invalid one.
template <typename Fail>
void check_reduction(int64_t reduction, Fail&& fail) {
  if (reduction < kReductionNone || reduction > kReductionSum)
    fail("cross_entropy_loss: invalid reduction", "0 (none), 1 (mean) or 2 (sum)",
         std::to_string(reduction));
}

/// Checks label_smoothing is in [0, 1], as torch does.
template <typename Fail>
void check_label_smoothing(double ls, Fail&& fail) {
  if (!(ls >= 0.0 && ls <= 1.0))
    fail("cross_entropy_loss: label_smoothing must be between 0.0 and 1.0", "0 <= value <= 1",
         std::to_string(ls));
}

/// self's sizes without the class dim (1, or 0 for a 1-d input): the shape of index targets and
/// of reduction='none' results.
template <typename S>
std::vector<S> batch_sizes(const std::vector<S>& self_sizes) {
  std::vector<S> out;
  const size_t cd = self_sizes.size() == 1 ? 0 : 1;
  for (size_t d = 0; d < self_sizes.size(); ++d)
    if (d != cd) out.push_back(self_sizes[d]);
  return out;
}

}  // namespace

std::vector<TensorType> shape_cross_entropy_loss(const Node& node) {
  auto fail = [&](const std::string& what, const std::string& expected, const std::string& actual) {
    sa::fail(node, what, expected, actual);
  };
  const TensorType& self = sa::type(node, "self");
  const TensorType& target = sa::type(node, "target");
  if (self.sizes.empty())
    fail("cross_entropy_loss needs an input of rank >= 1 (classes in dim 1, or dim 0 for 1-d)",
         "rank >= 1", "rank 0");
  if (!is_floating(self.dtype))
    fail("cross_entropy_loss needs a floating input", "a floating dtype", dtype_name(self.dtype));
  const int64_t reduction = sa::int_(node, "reduction", kReductionMean);
  check_reduction(reduction, fail);
  check_label_smoothing(sa::float_(node, "label_smoothing", 0.0), fail);
  const SymInt classes = self.sizes[self.sizes.size() == 1 ? 0 : 1];
  if (sa::has(node, "weight")) {
    const TensorType& w = sa::type(node, "weight");
    if (w.sizes.size() != 1 || w.sizes[0] != classes)
      fail("cross_entropy_loss: weight must be a 1-d tensor with one entry per class",
           str("[", classes.str(), "]"), sym_shape_str(w.sizes));
  }
  const std::vector<SymInt> batch = batch_sizes(self.sizes);
  if (target.sizes == self.sizes) {
    if (!is_floating(target.dtype))
      fail("cross_entropy_loss: a target with class probabilities must be floating",
           "a floating dtype", dtype_name(target.dtype));
    if (sa::int_(node, "ignore_index", -100) >= 0)
      fail("cross_entropy_loss: ignore_index is not supported for floating point target",
           "ignore_index < 0", std::to_string(sa::int_(node, "ignore_index", -100)));
  } else {
    if (target.sizes != batch)
      fail(
          "cross_entropy_loss: target must have the input's shape (probabilities) or the "
          "input's shape without the class dim (class indices)",
          sym_shape_str(self.sizes) + " or " + sym_shape_str(batch), sym_shape_str(target.sizes));
    if (!is_integral(target.dtype))
      fail("cross_entropy_loss: class-index targets must be integers", "an integer dtype",
           dtype_name(target.dtype));
  }
  TensorType out;
  out.dtype = self.dtype;
  out.device = self.device;
  if (reduction == kReductionNone) out.sizes = batch;
  return {out};
}

std::vector<RValue> kernel_cross_entropy_loss(KernelContext& ctx) {
  auto fail = [&](const std::string& what, const std::string& expected, const std::string& actual) {
    ctx.fail(what, expected, actual);
  };
  const Tensor& self_in = ctx.tensor("self");
  const Tensor& target_in = ctx.tensor("target");
  if (self_in.dim() == 0)
    fail("cross_entropy_loss needs an input of rank >= 1", "rank >= 1", "rank 0");
  if (!is_floating(self_in.dtype()))
    fail("cross_entropy_loss needs a floating input", "a floating dtype",
         dtype_name(self_in.dtype()));
  const int64_t reduction = ctx.int_arg("reduction", kReductionMean);
  check_reduction(reduction, fail);
  const double ls = ctx.float_arg("label_smoothing", 0.0);
  check_label_smoothing(ls, fail);
  const int64_t ignore_index = ctx.int_arg("ignore_index", -100);

  const Shape& sizes = self_in.sizes();
  const bool one_d = self_in.dim() == 1;
  const int64_t classes = sizes[one_d ? 0 : 1];
  const int64_t outer = one_d ? 1 : sizes[0];
  int64_t inner = 1;
  for (int64_t d = 2; d < self_in.dim(); ++d) inner *= sizes[d];
  const int64_t rows = outer * inner;  // one per loss term, in the batch shape's order
  const Shape batch = batch_sizes(sizes);

  std::optional<std::vector<double>> weight;
  if (auto w = ctx.opt_tensor("weight")) {
    if (w->dim() != 1 || w->size(0) != classes)
      fail("cross_entropy_loss: weight must be a 1-d tensor with one entry per class",
           str("[", classes, "]"), shape_str(w->sizes()));
    weight = w->to_doubles();
  }
  auto w_of = [&](int64_t c) { return weight ? (*weight)[static_cast<size_t>(c)] : 1.0; };

  // log_softmax over the class dim, row by row; element (i, c) of row i = (n, k) sits at
  // n * C * inner + c * inner + k of the contiguous input.
  const std::vector<double> x = self_in.contiguous().to_doubles();
  std::vector<double> lsm(x.size());
  for (int64_t n = 0; n < outer; ++n)
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t base = n * classes * inner + k;
      double mx = -INFINITY;
      for (int64_t c = 0; c < classes; ++c) mx = std::max(mx, x[base + c * inner]);
      double sum = 0;
      for (int64_t c = 0; c < classes; ++c) sum += std::exp(x[base + c * inner] - mx);
      const double log_sum = std::log(sum);
      for (int64_t c = 0; c < classes; ++c)
        lsm[base + c * inner] = x[base + c * inner] - mx - log_sum;
    }
  auto at = [&](int64_t row, int64_t c) {
    return lsm[static_cast<size_t>((row / inner) * classes * inner + c * inner + row % inner)];
  };

  std::vector<double> per_row(static_cast<size_t>(rows), 0.0);
  double result = 0;  // the reduced loss (mean / sum)
  if (target_in.sizes() == sizes) {
    // Probability targets.
    if (!is_floating(target_in.dtype()))
      fail("cross_entropy_loss: a target with class probabilities must be floating",
           "a floating dtype", dtype_name(target_in.dtype()));
    if (ignore_index >= 0)
      fail("cross_entropy_loss: ignore_index is not supported for floating point target",
           "ignore_index < 0", std::to_string(ignore_index));
    const std::vector<double> t = target_in.contiguous().to_doubles();
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t c = 0; c < classes; ++c) {
        const size_t off =
            static_cast<size_t>((r / inner) * classes * inner + c * inner + r % inner);
        const double tc = ls > 0 ? t[off] * (1 - ls) + ls / static_cast<double>(classes) : t[off];
        acc += lsm[off] * tc * w_of(c);
      }
      per_row[static_cast<size_t>(r)] = -acc;
      total += -acc;
    }
    result = reduction == kReductionMean
                 ? (self_in.numel() == 0 ? NAN : total / static_cast<double>(rows))
                 : total;
  } else {
    // Class-index targets.
    if (target_in.sizes() != batch)
      fail(
          "cross_entropy_loss: target must have the input's shape (probabilities) or the "
          "input's shape without the class dim (class indices)",
          shape_str(sizes) + " or " + shape_str(batch), shape_str(target_in.sizes()));
    if (!is_integral(target_in.dtype()))
      fail("cross_entropy_loss: class-index targets must be integers", "an integer dtype",
           dtype_name(target_in.dtype()));
    const Tensor t64 = target_in.contiguous().to(DType::kInt64);
    const int64_t* t = t64.data<int64_t>();
    double nll_sum = 0, smooth_sum = 0, weight_sum = 0;
    std::vector<double> smooth(static_cast<size_t>(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t tc = t[r];
      if (tc == ignore_index) continue;
      if (tc < 0 || tc >= classes)
        fail("cross_entropy_loss: target class out of bounds",
             str("a class in [0, ", classes, ") or ignore_index"), std::to_string(tc));
      const double w = w_of(tc);
      per_row[static_cast<size_t>(r)] = -w * at(r, tc);
      nll_sum += per_row[static_cast<size_t>(r)];
      weight_sum += w;
      if (ls > 0) {
        double s = 0;
        for (int64_t c = 0; c < classes; ++c) s += at(r, c) * w_of(c);
        smooth[static_cast<size_t>(r)] = -s;
        smooth_sum += -s;
      }
    }
    const double scale = ls / static_cast<double>(classes);
    if (reduction == kReductionNone) {
      if (ls > 0)
        for (int64_t r = 0; r < rows; ++r)
          per_row[static_cast<size_t>(r)] =
              (1 - ls) * per_row[static_cast<size_t>(r)] + scale * smooth[static_cast<size_t>(r)];
    } else {
      const double div = reduction == kReductionMean ? weight_sum : 1.0;
      result = nll_sum / div;
      if (ls > 0) result = (1 - ls) * result + scale * (smooth_sum / div);
    }
  }
  if (reduction != kReductionNone) return {Tensor::scalar(result, self_in.dtype())};
  return {Tensor::from_vector(per_row, batch).to(self_in.dtype())};
}

}  // namespace anvil::ops
