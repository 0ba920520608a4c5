// Runtime extern kernels for aten.conv_transpose1d.default and aten.conv_transpose2d.input, and the
// Tensor-level transposed convolution they share with the reference kernels (conv_transpose.h).
// The computation scatters every input pixel through the kernel window into the output; work is
// split over (batch, group) pairs, whose output channels are disjoint.
#include "runtime/kernels/conv_transpose.h"

#include "runtime/kernels/kernel_util.h"

namespace anvil::runtime::kern {

namespace {

/// acc += a * b, wrapping for integers.
template <typename A>
inline void mac(A& acc, A a, A b) {
  if constexpr (std::is_integral_v<A>)
    acc = static_cast<A>(static_cast<uint64_t>(acc) +
                         static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
  else
    acc += a * b;
}

/// The scatter loop in accumulation type A over contiguous A copies of x / w / bias; writes the
/// [N, O, OH, OW] accumulator `acc` (bias first), parallel over (batch, group).
template <typename A>
void run(const ConvTransposeGeom& g, const Tensor& xa, const Tensor& wa,
         const std::optional<Tensor>& ba,
         Tensor& acc) {
  const A* xp = xa.data<A>();
  const A* wp = wa.data<A>();
  A* op = acc.data<A>();
  const int64_t cg = g.c / g.groups, og = g.o / g.groups;
  const int64_t khw = g.kh * g.kw, ohw = g.oh * g.ow;
  const A* bp = ba ? ba->data<A>() : nullptr;
  auto one = [&](int64_t ng) {
    const int64_t b = ng / g.groups, gi = ng % g.groups;
    A* obase = op + (b * g.o + gi * og) * ohw;
    for (int64_t oc = 0; oc < og; ++oc)
      std::fill(obase + oc * ohw, obase + (oc + 1) * ohw, bp ? bp[gi * og + oc] : A(0));
    for (int64_t icl = 0; icl < cg; ++icl) {
      const int64_t ic = gi * cg + icl;
      const A* plane = xp + (b * g.c + ic) * g.h * g.w;
      const A* wbase = wp + ic * og * khw;
      for (int64_t ih = 0; ih < g.h; ++ih)
        for (int64_t iw = 0; iw < g.w; ++iw) {
          const A xv = plane[ih * g.w + iw];
          for (int64_t oc = 0; oc < og; ++oc) {
            const A* wk = wbase + oc * khw;
            A* oplane = obase + oc * ohw;
            for (int64_t ki = 0; ki < g.kh; ++ki) {
              const int64_t y = ih * g.sh - g.ph + ki * g.dh;
              if (y < 0 || y >= g.oh) continue;
              for (int64_t kj = 0; kj < g.kw; ++kj) {
                const int64_t xo = iw * g.sw - g.pw + kj * g.dw;
                if (xo < 0 || xo >= g.ow) continue;
                mac<A>(oplane[y * g.ow + xo], xv, wk[ki * g.kw + kj]);
              }
            }
          }
        }
    }
  };
  const int64_t work = cg * g.h * g.w * og * khw;
  parallel_for(0, g.n * g.groups, grain_for(work), [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) one(i);
  });
}

}  // namespace


void conv_transpose(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias,
                    const ConvTransposeArgs& a, const Tensor& out, const std::string& where) {
  const ConvTransposeGeom g = conv_transpose_geometry(x.sizes(), w.sizes(), a, where);
  ANVIL_CHECK(x.dtype() == w.dtype(), where, "input and weight dtypes differ",
              dtype_name(x.dtype()), dtype_name(w.dtype()));
  ANVIL_CHECK(!bias || bias->dtype() == x.dtype(), where, "input and bias dtypes differ",
              dtype_name(x.dtype()), bias ? dtype_name(bias->dtype()) : "");
  ANVIL_CHECK(!bias || (bias->dim() == 1 && bias->size(0) == g.o), where,
              "bias must be 1-D with one value per output channel", str("[", g.o, "]"),
              bias ? bias->type_str() : "");
  ANVIL_CHECK(x.dtype() != DType::kBool && !is_complex(x.dtype()) && is_supported(x.dtype()) &&
                  !is_float8(x.dtype()),
              where, "transposed convolution does not support this dtype",
              "an integer or floating dtype", dtype_name(x.dtype()));
  if (out.numel() == 0) return;
  const DType adt = x.dtype() == DType::kFloat64 ? DType::kFloat64
                    : is_floating(x.dtype())     ? DType::kFloat32
                                                 : DType::kInt64;
  const Tensor xa = x.to(adt).contiguous().reshape({g.n, g.c, g.h, g.w});
  const Tensor wa = w.to(adt).contiguous();
  std::optional<Tensor> ba;
  if (bias) ba = bias->to(adt).contiguous();
  Tensor acc = Tensor::empty({g.n, g.o, g.oh, g.ow}, adt);
  if (adt == DType::kFloat64)
    run<double>(g, xa, wa, ba, acc);
  else if (adt == DType::kFloat32)
    run<float>(g, xa, wa, ba, acc);
  else
    run<int64_t>(g, xa, wa, ba, acc);
  copy_cast(out, acc.reshape(out.sizes()));
}

}  // namespace anvil::runtime::kern

namespace anvil::runtime {

namespace {

/// aten.conv_transpose1d.default / conv_transpose2d.input: inputs input, weight, bias?; attrs
/// stride, padding, output_padding, groups, dilation.
int conv_transpose_extern(ExternCall& call) {
  const Tensor x = call.input_tensor(0), w = call.input_tensor(1);
  const std::optional<Tensor> bias = kern::opt_input(call, 2);
  kern::ConvTransposeArgs a;
  a.stride = call.attr_ints("stride", {1});
  a.padding = call.attr_ints("padding", {0});
  a.output_padding = call.attr_ints("output_padding", {0});
  a.dilation = call.attr_ints("dilation", {1});
  a.groups = call.attr_int("groups", 1);
  const Shape sizes = kern::conv_transpose_sizes(x.sizes(), w.sizes(), a, call.target());
  const Tensor out = kern::checked_output(call, 0, sizes, x.dtype());
  kern::conv_transpose(x, w, bias, a, out, call.target());
  return 0;
}

}  // namespace

/// Registers the transposed-convolution externs.
void register_conv_transpose_externs() {
  register_extern("aten.conv_transpose1d.default", conv_transpose_extern);
  register_extern("aten.conv_transpose2d.input", conv_transpose_extern);
}

}  // namespace anvil::runtime
