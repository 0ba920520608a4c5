// aten._scaled_mm into an extern step for the CUDA target's cuBLASLt FP8 GEMM
// (codegen/cuda/emit_cuda_fp8.cpp): cuBLASLt multiplies float8 only as "TN", so self is made a
// row-major buffer and mat2 a column-major one (a transposing copy when it is not one already);
// the scales and bias become buffers. (The CPU target lowers the op as any extern: its runtime
// kernel takes any strides.)
#include "passes/lower_internal.h"

#include "core/error.h"

namespace anvil::passes::detail {

namespace {

/// `t` as a buffer view that is row-major (unit stride in dim 1) with a constant-free layout the
/// GEMM can take: `t` itself when it is one, else a contiguous copy.
TensorView row_major(Lowerer& L, TRefPtr t, const std::string& name) {
  if (!t->is_buffer() || !is_const(t->strides[1], 1) || !(t->strides[0] == t->sizes[1]))
    L.realize(*t, name, /*need_contiguous=*/true);
  return view_from(*t);
}

/// `t` (k x n) as a column-major buffer view (strides (1, k)): itself when it is one, else its
/// transpose realized row-major (n x k) and viewed transposed.
TensorView column_major(Lowerer& L, TRefPtr t, const std::string& name) {
  if (t->is_buffer() && is_const(t->strides[0], 1) && t->strides[1] == t->sizes[0])
    return view_from(*t);
  const std::vector<SymInt> tsizes = {t->sizes[1], t->sizes[0]};
  TRefPtr tr = L.computed(
      tsizes, t->dtype, [&L, t](const Index& i) { return L.load(*t, {i[1], i[0]}); }, {t});
  L.realize(*tr, name, /*need_contiguous=*/true);
  TensorView v = view_from(*tr);
  v.sizes = {t->sizes[0], t->sizes[1]};
  v.strides = {SymInt(1), t->sizes[0]};
  return v;
}

}  // namespace

void lower_scaled_mm(Lowerer& L, const ir::Node& n) {
  if (const ir::Arg* r = n.arg("scale_result"); r && r->kind == ir::Arg::Kind::kTensor && r->value)
    L.fail("aten._scaled_mm with scale_result (a float8 result) is not supported", "None",
           "a tensor");
  TRefPtr a = L.arg("self"), b = L.arg("mat2"), sa = L.arg("scale_a"), sb = L.arg("scale_b");
  if (!a || !b || !sa || !sb) L.fail("aten._scaled_mm needs self, mat2, scale_a and scale_b");
  ExternStep ext;
  ext.name = L.out_name();
  ext.target = n.target;
  ext.nodes = {n.name};
  ext.inputs.push_back(row_major(L, a, n.name + "_self"));
  ext.inputs.push_back(column_major(L, b, n.name + "_mat2"));
  for (TRefPtr s : {sa, sb}) {
    L.realize(*s, n.name + "_scale", /*need_contiguous=*/true);
    ext.inputs.push_back(view_from(*s));
  }
  if (TRefPtr bias = L.arg("bias")) {
    L.realize(*bias, n.name + "_bias", /*need_contiguous=*/true);
    ext.inputs.push_back(view_from(*bias));
  } else {
    ext.inputs.push_back(TensorView{});
  }
  const ir::TensorType& ty = L.out_type(0);
  ext.attrs.push_back(int_attr("out_dtype", SymInt(static_cast<int64_t>(ty.dtype))));
  const ir::Arg* fast = n.arg("use_fast_accum");
  ext.attrs.push_back(
      int_attr("use_fast_accum", SymInt(fast && fast->kind == ir::Arg::Kind::kBool && fast->b)));
  const int buf = L.new_buffer(L.out_name(), ty.dtype, ty.sizes);
  TensorView out;
  out.buffer = buf;
  out.dtype = ty.dtype;
  out.sizes = ty.sizes;
  out.strides = contiguous(ty.sizes);
  out.offset = SymInt(0);
  ext.outputs.push_back(out);
  L.bind(0, L.view_of(buf, ty.dtype, ty.sizes, out.strides, SymInt(0)));
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = ext.nodes;
  for (const auto& v : ext.inputs)
    if (v.buffer >= 0) s.reads.insert(v.buffer);
  s.writes.insert(buf);
  s.ext = std::move(ext);
  L.add_snode(std::move(s));
}

}  // namespace anvil::passes::detail
