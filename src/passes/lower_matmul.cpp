// Lowering rules for matrix products (GEMM steps whose bias / scaling epilogue is a computed
// tensor the scheduler fuses into a loop over the output) and the generic extern-call rule.
// With PipelineOptions::mixed_gemm, mm / addmm / linear of a float16 / bfloat16 A and an int8
// matrix converted to A's dtype (spec B.4.1 "mixed_mm") become one GEMM step reading the int8
// matrix (GemmStep::b_dtype) instead of a conversion kernel and a GEMM.
#include <algorithm>

#include "core/error.h"
#include "passes/lower_internal.h"

namespace anvil::passes::detail {

namespace {

/// Whether a view's two trailing dims form a BLAS matrix; fills the operand.
bool as_matrix(const TRef& x, GemmOperand& op) {
  const size_t r = x.sizes.size();
  const SymInt& rows = x.sizes[r - 2];
  const SymInt& cols = x.sizes[r - 1];
  const SymInt& rs = x.strides[r - 2];
  const SymInt& cs = x.strides[r - 1];
  op.buffer = x.buffer;
  op.offset = x.offset;
  if (is_const(cs, 1) || is_const(cols, 1)) {
    if (is_const(rows, 1)) {
      op.trans = false;
      op.ld = SymInt::max(cols, SymInt(1));
      return true;
    }
    if (is_const(rs, 0)) return false;
    op.trans = false;
    op.ld = rs;
    return true;
  }
  if (is_const(rs, 1) || is_const(rows, 1)) {
    if (is_const(cs, 0)) return false;
    op.trans = true;
    op.ld = is_const(cols, 1) ? SymInt::max(rows, SymInt(1)) : cs;
    return true;
  }
  return false;
}

/// A GEMM operand from `x` ([batch..., rows, cols]) for output batch sizes `batch`; copies x
/// into a contiguous buffer when its layout is not a BLAS matrix.
GemmOperand operand(Lowerer& L, TRefPtr x, const std::vector<SymInt>& batch,
                    const std::string& name) {
  if (!x->is_buffer()) L.realize(*x, name);
  GemmOperand op;
  if (!as_matrix(*x, op)) {
    auto copy = std::make_shared<TRef>(*x);
    L.realize(*copy, name, /*need_contiguous=*/true);
    x = copy;
    as_matrix(*x, op);
  }
  const size_t xb = x->sizes.size() - 2;
  for (size_t d = 0; d < batch.size(); ++d) {
    const size_t lead = batch.size() - xb;
    if (d < lead) {
      op.batch_strides.push_back(SymInt(0));
      continue;
    }
    const size_t xd = d - lead;
    op.batch_strides.push_back(
        is_const(x->sizes[xd], 1) && !is_const(batch[d], 1) ? SymInt(0) : x->strides[xd]);
  }
  return op;
}

/// Views a tensor with sizes [..., K] as [M, K] when its leading dims merge; else null.
TRefPtr flatten_rows(const TRef& x) {
  if (!x.is_buffer()) return nullptr;
  const size_t r = x.sizes.size();
  std::vector<size_t> dims;
  for (size_t d = 0; d + 1 < r; ++d)
    if (!is_const(x.sizes[d], 1)) dims.push_back(d);
  for (size_t k = 0; k + 1 < dims.size(); ++k)
    if (!(x.strides[dims[k]] == x.strides[dims[k + 1]] * x.sizes[dims[k + 1]])) return nullptr;
  auto t = std::make_shared<TRef>(x);
  SymInt m(1);
  for (size_t d = 0; d + 1 < r; ++d) m = m * x.sizes[d];
  t->sizes = {m, x.sizes[r - 1]};
  t->strides = {dims.empty() ? x.sizes[r - 1] : x.strides[dims.back()], x.strides[r - 1]};
  return t;
}

/// Emits C = alpha * A @ B (A: [batchA..., M, K], B: [batchB..., K, N]) into a new contiguous
/// buffer [batch..., M, N]; returns a view of it with sizes `out_sizes` (same element count).
TRefPtr gemm(Lowerer& L, TRefPtr a, TRefPtr b, double alpha, const std::vector<SymInt>& out_sizes,
             DType dtype) {
  const size_t ra = a->sizes.size(), rb = b->sizes.size();
  const size_t ba = ra - 2, bb = rb - 2, nb = std::max(ba, bb);
  std::vector<SymInt> batch(nb, SymInt(1));
  for (size_t d = 0; d < nb; ++d) {
    SymInt s(1);
    if (d >= nb - ba && !is_const(a->sizes[d - (nb - ba)], 1)) s = a->sizes[d - (nb - ba)];
    if (d >= nb - bb && !is_const(b->sizes[d - (nb - bb)], 1)) s = b->sizes[d - (nb - bb)];
    batch[d] = s;
  }
  GemmStep g;
  g.name = L.out_name();
  g.nodes = {L.node().name};
  g.dtype = dtype;
  if (b->dtype != dtype) g.b_dtype = b->dtype;  // mixed: B converted in the kernel
  g.m = a->sizes[ra - 2];
  g.k = a->sizes[ra - 1];
  g.n = b->sizes[rb - 1];
  g.batch = batch;
  g.alpha = alpha;
  g.a = operand(L, a, batch, L.out_name() + "_a");
  g.b = operand(L, b, batch, L.out_name() + "_b");
  std::vector<SymInt> csizes = batch;
  csizes.push_back(g.m);
  csizes.push_back(g.n);
  const int cb = L.new_buffer(L.out_name() + "_mm", dtype, csizes);
  const auto cst = contiguous(csizes);
  g.c.buffer = cb;
  g.c.offset = SymInt(0);
  g.c.ld = SymInt::max(g.n, SymInt(1));
  g.c.trans = false;
  for (size_t d = 0; d < nb; ++d) g.c.batch_strides.push_back(cst[d]);
  SNode s;
  s.kind = SNode::Kind::kGemm;
  s.nodes = g.nodes;
  s.reads = {g.a.buffer, g.b.buffer};
  s.writes = {cb};
  s.gemm = g;
  L.add_snode(std::move(s));
  return L.view_of(cb, dtype, out_sizes, contiguous(out_sizes), SymInt(0));
}

/// `mm` + beta * bias (broadcast), as a computed tensor.
TRefPtr add_bias(Lowerer& L, const TRefPtr& mm, const TRefPtr& bias, double beta, DType dt) {
  if (!bias) return mm;
  auto& E = L.ex();
  const auto sizes = mm->sizes;
  return L.computed(sizes, dt,
                    [&L, &E, mm, bias, beta, sizes, dt](const Index& idx) {
                      int bv =
                          E.cast(L.load(*bias, Lowerer::broadcast_index(*bias, sizes, idx)), dt);
                      if (beta != 1.0) bv = E.binary(ExprOp::kMul, E.constant(beta, dt), bv, dt);
                      return E.binary(ExprOp::kAdd, L.load(*mm, idx), bv, dt);
                    },
                    {mm, bias});
}

/// A 2-D view [rows, cols] of a 1-D tensor (as_row: [1, n], else [n, 1]).
TRefPtr vec_as_matrix(Lowerer& L, TRefPtr v, bool as_row) {
  if (!v->is_buffer()) L.realize(*v, L.out_name() + "_vec");
  auto t = std::make_shared<TRef>(*v);
  if (as_row) {
    t->sizes = {SymInt(1), v->sizes[0]};
    t->strides = {SymInt(0), v->strides[0]};
  } else {
    t->sizes = {v->sizes[0], SymInt(1)};
    t->strides = {v->strides[0], SymInt(0)};
  }
  return t;
}

double float_attr(const ir::Node& n, const char* name, double dflt) {
  return ir::shape_args::float_(n, name, dflt);
}

/// Whether node `n` converts its tensor input's dtype and nothing else (same sizes).
bool is_dtype_conversion(const ir::Node& n) {
  if (n.target != "aten._to_copy.default" && n.target != "aten.to.dtype" &&
      n.target != "aten.to.dtype_layout" && n.target != "prims.convert_element_type.default")
    return false;
  const ir::Arg* self = n.arg("self");
  if (!self || !self->value || !self->value->is_tensor() || n.outputs.size() != 1) return false;
  const ir::TensorType& in = self->value->type;
  const ir::TensorType& out = n.outputs[0]->type;
  return in.sizes == out.sizes && in.device == out.device;
}

/// Whether node `n` transposes a matrix: t, transpose(0, 1) or permute([1, 0]) of a 2-D tensor.
bool is_matrix_transpose(const ir::Node& n) {
  const ir::Arg* self = n.arg("self");
  if (!self || !self->value || !self->value->is_tensor() || self->value->type.sizes.size() != 2)
    return false;
  auto dim = [](int64_t d) { return d < 0 ? d + 2 : d; };
  if (n.target == "aten.t.default") return true;
  if (n.target == "aten.transpose.int") {
    const ir::Arg* d0 = n.arg("dim0");
    const ir::Arg* d1 = n.arg("dim1");
    return d0 && d1 && d0->kind == ir::Arg::Kind::kInt && d1->kind == ir::Arg::Kind::kInt &&
           dim(d0->i) + dim(d1->i) == 1 && dim(d0->i) != dim(d1->i);
  }
  if (n.target == "aten.permute.default") {
    const ir::Arg* dims = n.arg("dims");
    return dims && dims->kind == ir::Arg::Kind::kInts && dims->ints.size() == 2 &&
           dim(dims->ints[0]) == 1 && dim(dims->ints[1]) == 0;
  }
  return false;
}

/// The mixed form of a 2-D GEMM operand (PipelineOptions::mixed_gemm): when `v` is an int8
/// matrix converted to `dt` (float16 / bfloat16), directly or with one matrix transpose before
/// or after the conversion, the int8 matrix as a buffer view of `v`'s sizes (the GEMM then
/// reads it and converts in its kernel: no conversion kernel, no converted copy); else null.
TRefPtr mixed_operand(Lowerer& L, const ir::Value* v, DType dt) {
  if (!L.options || !L.options->mixed_gemm || !v || !v->is_tensor()) return nullptr;
  if (dt != DType::kFloat16 && dt != DType::kBFloat16) return nullptr;
  if (v->type.dtype != dt || v->type.sizes.size() != 2) return nullptr;
  bool transposed = false;
  const ir::Node* p = v->producer;
  if (p && is_matrix_transpose(*p)) {  // t(to(w))
    transposed = true;
    p = p->arg("self")->value->producer;
  }
  if (!p || !is_dtype_conversion(*p)) return nullptr;
  const ir::Value* src = p->arg("self")->value;  // to(w) or to(t(w))
  if (src->type.dtype != DType::kInt8) return nullptr;
  TRefPtr w = L.ref(src);
  if (!w || !w->is_buffer() || w->sizes.size() != 2) return nullptr;
  auto b = std::make_shared<TRef>(*w);
  if (transposed) {
    std::swap(b->sizes[0], b->sizes[1]);
    std::swap(b->strides[0], b->strides[1]);
  }
  GemmOperand probe;
  if (!as_matrix(*b, probe)) return nullptr;  // not a BLAS matrix: keep the two steps
  return b;
}

/// Argument `name` of the current node: its mixed form (mixed_operand) when it has one.
TRefPtr gemm_arg(Lowerer& L, const std::string& name, DType dt) {
  const ir::Arg* a = L.node().arg(name);
  if (a && a->kind == ir::Arg::Kind::kTensor)
    if (TRefPtr m = mixed_operand(L, a->value, dt)) return m;
  return L.arg(name);
}

}  // namespace

bool lower_matmul(Lowerer& L, const ir::Node& n) {
  const std::string& t = n.target;
  if (t != "aten.linear.default" && t != "aten.mm.default" && t != "aten.bmm.default" &&
      t != "aten.matmul.default" && t != "aten.addmm.default" && t != "aten.baddbmm.default" &&
      t != "aten.outer.default")
    return false;
  const ir::TensorType& out = L.out_type();
  const DType dt = out.dtype;
  auto& E = L.ex();
  if (t == "aten.outer.default") {
    TRefPtr a = L.arg("self"), b = L.arg("vec2");
    L.bind(0, L.computed(out.sizes, dt,
                         [&L, &E, a, b, dt](const Index& idx) {
                           return E.binary(ExprOp::kMul, E.cast(L.load(*a, {idx[0]}), dt),
                                           E.cast(L.load(*b, {idx[1]}), dt), dt);
                         },
                         {a, b}));
    return true;
  }
  if (t == "aten.linear.default") {
    TRefPtr x = L.arg("input"), w = gemm_arg(L, "weight", dt), bias = L.arg("bias");
    if (!w->is_buffer()) L.realize(*w, L.out_name() + "_w");
    auto wt = std::make_shared<TRef>(*w);  // weight^T: [K, N]
    std::swap(wt->sizes[0], wt->sizes[1]);
    std::swap(wt->strides[0], wt->strides[1]);
    TRefPtr a;
    if (x->sizes.size() == 1) {
      a = vec_as_matrix(L, x, true);
    } else {
      if (!x->is_buffer()) L.realize(*x, L.out_name() + "_in");
      a = flatten_rows(*x);
      if (!a) {
        auto copy = std::make_shared<TRef>(*x);
        L.realize(*copy, L.out_name() + "_in", true);
        a = flatten_rows(*copy);
      }
    }
    TRefPtr mm = gemm(L, a, wt, 1.0, out.sizes, dt);
    L.bind(0, add_bias(L, mm, bias, 1.0, dt));
    return true;
  }
  if (t == "aten.mm.default" || t == "aten.bmm.default") {
    TRefPtr b = t == "aten.mm.default" ? gemm_arg(L, "mat2", dt) : L.arg("mat2");
    L.bind(0, gemm(L, L.arg("self"), b, 1.0, out.sizes, dt));
    return true;
  }
  if (t == "aten.addmm.default" || t == "aten.baddbmm.default") {
    const bool batched = t == "aten.baddbmm.default";
    TRefPtr a = L.arg(batched ? "batch1" : "mat1");
    TRefPtr b = batched ? L.arg("batch2") : gemm_arg(L, "mat2", dt);
    const double alpha = float_attr(n, "alpha", 1.0), beta = float_attr(n, "beta", 1.0);
    TRefPtr mm = gemm(L, a, b, alpha, out.sizes, dt);
    L.bind(0, beta == 0.0 ? mm : add_bias(L, mm, L.arg("self"), beta, dt));
    return true;
  }
  // matmul
  TRefPtr a = L.arg("self"), b = L.arg("other");
  const size_t ra = a->sizes.size(), rb = b->sizes.size();
  if (ra == 1 && rb == 1) {  // dot product: a reduction
    auto prod = L.computed(a->sizes, dt,
                           [&L, &E, a, b, dt](const Index& idx) {
                             return E.binary(ExprOp::kMul, E.cast(L.load(*a, idx), dt),
                                             E.cast(L.load(*b, idx), dt), dt);
                           },
                           {a, b});
    L.bind(0, L.reduce(prod, {0}, false, ReduceOp::kSum, dt));
    return true;
  }
  if (ra == 1) a = vec_as_matrix(L, a, true);
  if (rb == 1) b = vec_as_matrix(L, b, false);
  if (b->sizes.size() == 2 && a->sizes.size() > 2) {
    if (!a->is_buffer()) L.realize(*a, L.out_name() + "_in");
    TRefPtr fa = flatten_rows(*a);
    if (!fa) {
      auto copy = std::make_shared<TRef>(*a);
      L.realize(*copy, L.out_name() + "_in", true);
      fa = flatten_rows(*copy);
    }
    L.bind(0, gemm(L, fa, b, 1.0, out.sizes, dt));
    return true;
  }
  L.bind(0, gemm(L, a, b, 1.0, out.sizes, dt));
  return true;
}

namespace {


/// An extern operand: the value's buffer view (computed values are realized first).
TensorView operand_view(Lowerer& L, const ir::Value* v, const std::string& name) {
  TRefPtr t = L.ref(v);
  if (!t->is_buffer()) L.realize(*t, name);
  return view_from(*t);
}

}  // namespace


void lower_extern(Lowerer& L, const ir::Node& n) {
  // the CUDA target's FP8 GEMM wants its own layouts; the CPU's extern takes any strides
  if (n.target == "aten._scaled_mm.default" && L.options &&
      L.options->target_device == Device::Type::kCUDA)
    return lower_scaled_mm(L, n);
  ExternStep ext;
  ext.name = L.out_name();
  ext.target = n.target;
  ext.nodes = {n.name};
  const auto* tensor_names = extern_tensor_args(n.target);
  std::set<std::string> tensor_set;
  auto add_tensor_arg = [&](const ir::Arg* a, const std::string& name) {
    if (!a || a->kind == ir::Arg::Kind::kNone || (a->kind == ir::Arg::Kind::kTensor && !a->value)) {
      ext.inputs.push_back(TensorView{});  // none
      return;
    }
    if (a->kind == ir::Arg::Kind::kTensor && a->value->kind == ir::ValueKind::kTensor) {
      ext.inputs.push_back(operand_view(L, a->value, n.name + "_" + name));
      return;
    }
    if (a->kind == ir::Arg::Kind::kTensors || a->kind == ir::Arg::Kind::kOptTensors) {
      for (const ir::Value* v : a->values)
        ext.inputs.push_back(v ? operand_view(L, v, n.name + "_" + name) : TensorView{});
      ext.attrs.push_back(int_attr(a->name, SymInt(static_cast<int64_t>(a->values.size()))));
      return;
    }
    L.fail("extern tensor argument '" + name + "' is not a tensor");
  };
  if (tensor_names) {
    for (const auto& nm : *tensor_names) {
      tensor_set.insert(nm);
      add_tensor_arg(n.arg(nm), nm);
    }
  } else {
    for (const auto& a : n.args)
      if ((a.kind == ir::Arg::Kind::kTensor && a.value &&
           a.value->kind == ir::ValueKind::kTensor) ||
          a.kind == ir::Arg::Kind::kTensors || a.kind == ir::Arg::Kind::kOptTensors) {
        tensor_set.insert(a.name);
        add_tensor_arg(&a, a.name);
      }
  }
  for (const auto& a : n.args) {
    if (tensor_set.count(a.name)) continue;
    ExternAttr at;
    at.name = a.name;
    switch (a.kind) {
      case ir::Arg::Kind::kNone:
      case ir::Arg::Kind::kDevice:
        continue;
      case ir::Arg::Kind::kTensor:
        if (!a.value || a.value->kind != ir::ValueKind::kSymInt) continue;
        at.i = a.value->sym;
        break;
      case ir::Arg::Kind::kInt:
      case ir::Arg::Kind::kLayout:
      case ir::Arg::Kind::kMemoryFormat:
        at.i = SymInt(a.i);
        break;
      case ir::Arg::Kind::kBool:
        at.i = SymInt(a.b ? 1 : 0);
        break;
      case ir::Arg::Kind::kScalarType:
        at.i = SymInt(static_cast<int64_t>(a.dtype));
        break;
      case ir::Arg::Kind::kFloat:
        at.kind = 1;
        at.f = a.f;
        break;
      case ir::Arg::Kind::kString:
        at.kind = 2;
        at.s = a.s;
        break;
      case ir::Arg::Kind::kInts:
        at.kind = 3;
        for (int64_t v : a.ints) at.ints.emplace_back(v);
        break;
      case ir::Arg::Kind::kSymInt:
        if (a.symints.empty()) continue;
        at.i = a.symints[0].value ? a.symints[0].value->sym : SymInt(a.symints[0].constant);
        break;
      case ir::Arg::Kind::kSymInts:
        at.kind = 3;
        for (const auto& r : a.symints)
          at.ints.push_back(r.value ? r.value->sym : SymInt(r.constant));
        break;
      default:
        L.fail("extern argument '" + a.name + "' has a kind extern calls cannot pass",
               "int, float, bool, str or int list", "a list of floats or bools");
    }
    ext.attrs.push_back(at);
  }
  std::vector<ir::TensorType> types;
  try {
    types = n.schema->shape(n);
  } catch (const Error&) {
    for (const ir::Value* o : n.outputs) types.push_back(o ? o->type : ir::TensorType{});
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const ir::Value* o = n.outputs[i];
    if (o && o->kind != ir::ValueKind::kTensor)
      L.fail("extern ops with non-tensor results are not supported", "tensor outputs", o->name);
    const ir::TensorType& ty = o ? o->type : types.at(i);
    const int b =
        L.new_buffer(o ? o->name : n.name + "_out" + std::to_string(i), ty.dtype, ty.sizes);
    TensorView tv;
    tv.buffer = b;
    tv.dtype = ty.dtype;
    tv.sizes = ty.sizes;
    tv.strides = contiguous(ty.sizes);
    tv.offset = SymInt(0);
    ext.outputs.push_back(tv);
    if (o) L.bind(i, L.view_of(b, ty.dtype, ty.sizes, tv.strides, SymInt(0)));
  }
  SNode s;
  s.kind = SNode::Kind::kExtern;
  s.nodes = ext.nodes;
  for (const auto& v : ext.inputs)
    if (v.buffer >= 0) s.reads.insert(v.buffer);
  for (const auto& v : ext.outputs) s.writes.insert(v.buffer);
  s.ext = std::move(ext);
  L.add_snode(std::move(s));
}

}  // namespace anvil::passes::detail

namespace anvil::passes {

/// The tensor argument names of the extern targets of docs/externs.md, in schema order.
const std::vector<std::string>* extern_tensor_args(const std::string& target) {
  static const std::map<std::string, std::vector<std::string>> kArgs = {
      {"aten.convolution.default", {"input", "weight", "bias"}},
      {"aten.conv1d.default", {"input", "weight", "bias"}},
      {"aten.conv2d.default", {"input", "weight", "bias"}},
      {"aten.max_pool2d.default", {"self"}},
      {"aten.avg_pool2d.default", {"self"}},
      {"aten.adaptive_avg_pool2d.default", {"self"}},
      {"aten._adaptive_avg_pool2d.default", {"self"}},
      {"aten.max_pool2d_with_indices.default", {"self"}},
      {"aten.max_pool3d.default", {"self"}},
      {"aten.max_pool3d_with_indices.default", {"self"}},
      {"aten.avg_pool3d.default", {"self"}},
      {"aten.adaptive_avg_pool3d.default", {"self"}},
      {"aten._adaptive_avg_pool3d.default", {"self"}},
      {"aten.grid_sampler.default", {"input", "grid"}},
      {"aten.grid_sampler_2d.default", {"input", "grid"}},
      {"aten.im2col.default", {"self"}},
      {"aten.col2im.default", {"self"}},
      {"aten.cdist.default", {"x1", "x2"}},
      {"aten._cdist_forward.default", {"x1", "x2"}},
      {"aten.pdist.default", {"self"}},
      {"aten._pdist_forward.default", {"self"}},
      {"aten.argmin.default", {"self"}},
      {"aten.cumprod.default", {"self"}},
      {"aten.sort.default", {"self"}},
      {"aten.sort.stable", {"self"}},
      {"aten.topk.default", {"self"}},
      {"aten.argsort.default", {"self"}},
      {"aten.argsort.stable", {"self"}},
      {"aten.masked_scatter.default", {"self", "mask", "source"}},
      {"aten.scaled_dot_product_attention.default", {"query", "key", "value", "attn_mask"}},
      {"aten.embedding.default", {"weight", "indices"}},
      {"aten._scaled_mm.default", {"self", "mat2", "scale_a", "scale_b", "bias", "scale_result"}},
      {"aten.index.Tensor", {"self", "indices"}},
      {"aten.index_select.default", {"self", "index"}},
      {"aten.gather.default", {"self", "index"}},
      {"aten.cumsum.default", {"self"}},
      {"aten.diff.default", {"self", "prepend", "append"}},
      {"aten.argmax.default", {"self"}},
      {"aten.cat.default", {"tensors"}},
      {"aten.stack.default", {"tensors"}},
      {"aten.repeat.default", {"self"}},
      {"aten.mm.default", {"self", "mat2"}},
      {"aten.bmm.default", {"self", "mat2"}},
      {"aten.conv_transpose1d.default", {"input", "weight", "bias"}},
      {"aten.conv_transpose2d.input", {"input", "weight", "bias"}},
      {"aten.scatter.src", {"self", "index", "src"}},
      {"aten.scatter.value", {"self", "index"}},
      {"aten.scatter_reduce.two", {"self", "index", "src"}},
      {"aten.scatter_add.default", {"self", "index", "src"}},
      {"aten.index_put.default", {"self", "indices", "values"}},
      {"aten.embedding_bag.padding_idx", {"weight", "indices", "offsets", "per_sample_weights"}},
      {"aten._embedding_bag.default", {"weight", "indices", "offsets", "per_sample_weights"}},
      {"aten.repeat_interleave.Tensor", {"repeats"}},
  };
  auto it = kArgs.find(target);
  return it == kArgs.end() ? nullptr : &it->second;
}

}  // namespace anvil::passes
