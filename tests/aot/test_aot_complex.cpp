// Complex dtypes (spec/aot.md section 4, cases 12, 44 and 77): complex64 add, fftn plus its real
// view and more FFT math (fixtures of scripts/export_aot_complex.py / export_aot_misc.py, with
// PyTorch 2.11's outputs), complex32 / complex64 / complex128 inputs through the runtime checks,
// the interpreter against PyTorch, .npy round trips of complex arrays, and the input check for a
// complex input of the wrong precision.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <complex>
#include <cstring>
#include <filesystem>

#include "anvil/anvil_c.h"
#include "aot_util.h"
#include "core/fft.h"
#include "core/npy.h"
#include "frontend/pt2_reader.h"
#include "interp/interpreter.h"
#include "ir/parser.h"
#include "runtime/model.h"

namespace anvil::aot_test {
namespace {

namespace fs = std::filesystem;

std::string aot_fixture(const std::string& name) {
  return std::string(ANVIL_FIXTURES_DIR) + "/aot/" + name + ".pt2";
}

/// A complex tensor's values as its real dtype with a trailing dim of 2 (a view, like
/// torch.view_as_real); real tensors are returned unchanged.
Tensor real_view(const Tensor& t) {
  if (!is_complex(t.dtype())) return t;
  Shape sizes = t.sizes(), strides = t.strides();
  for (auto& s : strides) s *= 2;
  sizes.push_back(2);
  strides.push_back(1);
  return Tensor(t.storage(), complex_to_real(t.dtype()), sizes, strides, t.storage_offset() * 2);
}

/// Compares outputs with PyTorch's, complex ones on both parts, within tolerance(dtype) (1e-4
/// relative for f32 / complex64).
void expect_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                  const std::string& label) {
  ASSERT_EQ(got.size(), want.size()) << label;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype()) << label << " output " << i;
    const double err = rel_error(real_view(got[i]), real_view(want[i]));
    EXPECT_LE(err, tolerance(complex_to_real(want[i].dtype())))
        << label << " output " << i << " " << got[i].type_str();
  }
}

/// True when two tensors have the same dtype, sizes and element bytes.
bool bitwise_equal(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0;
}

// Case 12: complex64 add of two 8-element vectors, compiled and interpreted, against the sum
// computed by hand.
TEST(AotComplex, C12_Complex64Add) {
  ANVIL_AOT_LOAD(model, "aot_12_complex_add");
  ASSERT_EQ(model.input_specs().size(), 2u);
  EXPECT_EQ(model.input_specs()[0].dtype, DType::kComplex64);
  std::vector<std::complex<float>> a, b, sum;
  for (int k = 0; k < 8; ++k) {
    a.emplace_back(0.5f * k - 1.0f, 0.25f * k);
    b.emplace_back(3.0f - k, -1.5f * k + 0.125f);
    sum.emplace_back(a.back().real() + b.back().real(), a.back().imag() + b.back().imag());
  }
  const Tensor ta = Tensor::from_vector(a), tb = Tensor::from_vector(b);
  const Tensor want = Tensor::from_vector(sum);
  const auto got = model.run({ta, tb});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_TRUE(bitwise_equal(got[0], want)) << got[0].type_str();
  // A strided (every other element) view of a longer vector as input b.
  std::vector<std::complex<float>> wide;
  for (const auto& v : b) wide.insert(wide.end(), {v, std::complex<float>(99, 99)});
  const Tensor tw = Tensor::from_vector(wide).as_strided({8}, {2}, 0);
  const auto got_strided = model.run({ta, tw.contiguous()});
  EXPECT_TRUE(bitwise_equal(got_strided[0], want));
  const auto graph = frontend::load_pt2(aot_fixture("aot_12_complex_add"));
  interp::Interpreter ref(*graph);
  EXPECT_TRUE(bitwise_equal(ref.run({ta, tw})[0], want));
}

// Case 44: fftn of a real (16,16,16) tensor -> complex64 plus its float32 real view (trailing
// dim 2), compiled (FFTW extern + pointwise view_as_real) and interpreted, against PyTorch.
TEST(AotComplex, C44_FftnAndRealView) {
  ANVIL_AOT_LOAD(model, "aot_44_fftn");
  const auto ins = read_set("aot_44_fftn", "in", "");
  const auto want = read_set("aot_44_fftn", "out", "");
  ASSERT_EQ(want.size(), 2u);
  ASSERT_EQ(want[0].dtype(), DType::kComplex64);
  ASSERT_EQ(want[1].sizes(), (Shape{16, 16, 16, 2}));
  const auto got = model.run(ins);
  expect_close(got, want, "case 44 fftn");
  // The real view holds exactly the complex output's parts.
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(bitwise_equal(real_view(got[0]).contiguous(), got[1]));
  const auto graph = frontend::load_pt2(aot_fixture("aot_44_fftn"));
  interp::Interpreter ref(*graph);
  const auto r = ref.run(ins);
  expect_close(r, want, "case 44 fftn (interpreter)");
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[1].strides(), (Shape{512, 32, 2, 1}));  // a view with doubled strides
  EXPECT_EQ(r[1].storage(), r[0].storage());
}

// Case 44 (more): fft(dim=-1), complex mul and add, abs (-> float32), ifft and real.
TEST(AotComplex, C44_FftComplexMathAbsIfftReal) {
  ANVIL_AOT_LOAD(model, "aot_44_fft_more");
  const auto ins = read_set("aot_44_fft_more", "in", "");
  const auto want = read_set("aot_44_fft_more", "out", "");
  ASSERT_EQ(want.size(), 2u);
  EXPECT_EQ(want[0].dtype(), DType::kFloat32);
  expect_close(model.run(ins), want, "case 44 fft_more");
  const auto graph = frontend::load_pt2(aot_fixture("aot_44_fft_more"));
  interp::Interpreter ref(*graph);
  expect_close(ref.run(ins), want, "case 44 fft_more (interpreter)");
}

/// Case 77's inputs: a complex32 (2,) made from the fixture's fp16 (2,2) real view, b complex64
/// (8,), c complex128 0-d.
std::vector<Tensor> case77_inputs() {
  const auto ins = read_set("aot_77_complex_checks", "in", "");
  EXPECT_EQ(ins.size(), 3u);
  EXPECT_EQ(ins[0].dtype(), DType::kFloat16);
  Tensor a = Tensor::empty({2}, DType::kComplex32);
  real_view(a).copy_from(ins[0]);
  return {a, ins[1], ins[2]};
}

// Case 77: complex32 (2,), complex64 (8,) and complex128 0-d inputs pass the runtime checks;
// the outputs are a.clone(), b + b and c * 2, exactly.
TEST(AotComplex, C77_ComplexInputsPassTheRuntimeChecks) {
  ANVIL_AOT_LOAD(model, "aot_77_complex_checks");
  ASSERT_EQ(model.input_specs().size(), 3u);
  EXPECT_EQ(model.input_specs()[0].dtype, DType::kComplex32);
  EXPECT_EQ(model.input_specs()[1].dtype, DType::kComplex64);
  EXPECT_EQ(model.input_specs()[2].dtype, DType::kComplex128);
  const auto ins = case77_inputs();
  ASSERT_EQ(ins[1].dtype(), DType::kComplex64);
  ASSERT_EQ(ins[2].dtype(), DType::kComplex128);
  ASSERT_EQ(ins[2].dim(), 0);
  const auto want = read_set("aot_77_complex_checks", "out", "");
  ASSERT_EQ(want.size(), 3u);
  const Tensor twice_b = [&] {
    Tensor t = ins[1].clone();
    auto* p = t.data<std::complex<float>>();
    for (int64_t i = 0; i < t.numel(); ++i) p[i] *= 2.0f;
    return t;
  }();
  const Tensor twice_c = Tensor::from_vector(
      std::vector<std::complex<double>>{ins[2].data<std::complex<double>>()[0] * 2.0});
  auto check = [&](const std::vector<Tensor>& got, const std::string& label) {
    ASSERT_EQ(got.size(), 3u) << label;
    EXPECT_TRUE(bitwise_equal(got[0], ins[0])) << label << ": a.clone()";
    EXPECT_TRUE(bitwise_equal(real_view(got[0]).contiguous(), want[0])) << label;
    EXPECT_TRUE(bitwise_equal(got[1], twice_b)) << label << ": b + b";
    EXPECT_TRUE(bitwise_equal(got[1], want[1])) << label;
    EXPECT_TRUE(bitwise_equal(got[2], twice_c)) << label << ": c * 2";
    EXPECT_TRUE(bitwise_equal(got[2], want[2])) << label;
  };
  check(model.run(ins), "compiled");
  const auto graph = frontend::load_pt2(aot_fixture("aot_77_complex_checks"));
  interp::Interpreter ref(*graph);
  check(ref.run(ins), "interpreter");
}

// A complex64 tensor where complex128 is expected fails the input check, naming the input and
// both dtypes.
TEST(AotComplex, WrongComplexPrecisionNamesTheInput) {
  ANVIL_AOT_LOAD(model, "aot_77_complex_checks");
  auto ins = case77_inputs();
  const std::string name = model.input_specs()[2].name;
  ins[2] = ins[2].to(DType::kComplex64);
  const std::string e = error_of([&] { model.run(ins); });
  ASSERT_FALSE(e.empty());
  EXPECT_NE(e.find("'" + name + "'"), std::string::npos) << e;
  EXPECT_NE(e.find("unmatched dtype"), std::string::npos) << e;
  EXPECT_NE(e.find("c128"), std::string::npos) << e;
  EXPECT_NE(e.find("c64"), std::string::npos) << e;
}

// .npy files of complex64 (<c8) and complex128 (<c16) round-trip exactly, including a
// non-contiguous view; the fixtures read as complex.
TEST(AotComplex, NpyRoundTripOfComplex) {
  const fs::path dir = fs::temp_directory_path() / ("anvil_cplx_npy_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::vector<std::complex<float>> v64;
  std::vector<std::complex<double>> v128;
  for (int k = 0; k < 6; ++k) {
    v64.emplace_back(0.5f * k, -1.0f / (k + 1));
    v128.emplace_back(1e-3 * k, 1e300 / (k + 1));
  }
  const Tensor t64 = Tensor::from_vector(v64, {2, 3});
  const Tensor t128 = Tensor::from_vector(v128, {3, 2}).transpose(0, 1);  // non-contiguous
  for (const Tensor& t : {t64, t128}) {
    const std::string f = (dir / (std::string(dtype_name(t.dtype())) + ".npy")).string();
    write_npy(f, t);
    const Tensor back = read_npy(f);
    EXPECT_TRUE(bitwise_equal(back, t.contiguous())) << f;
  }
  EXPECT_EQ(read_set("aot_77_complex_checks", "in", "")[1].dtype(), DType::kComplex64);
  EXPECT_EQ(read_set("aot_77_complex_checks", "in", "")[2].dtype(), DType::kComplex128);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

// The FFT core against values computed by hand: the transform of an impulse is all ones,
// ifft(fft(x)) = x, irfft(rfft(x)) = x for odd and even lengths, norm="ortho" scales by
// 1/sqrt(n), and a bad norm is a clear error.
TEST(AotComplex, FftCoreByHand) {
  const std::string w = "test";
  const Tensor impulse = Tensor::from_vector(std::vector<float>{1, 0, 0, 0});
  const Tensor f = fft_compute(impulse, {FftKind::kFft, {}, {}, ""}, w);
  ASSERT_EQ(f.dtype(), DType::kComplex64);
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(f.data<std::complex<float>>()[k], std::complex<float>(1, 0));
  const Tensor ortho = fft_compute(impulse, {FftKind::kFft, {}, {}, "ortho"}, w);
  EXPECT_FLOAT_EQ(ortho.data<std::complex<float>>()[2].real(), 0.5f);
  for (int64_t n : {5, 6}) {
    std::vector<double> xs;
    for (int64_t i = 0; i < 2 * n; ++i) xs.push_back(std::sin(0.7 * i) + 0.1 * i);
    const Tensor x = Tensor::from_vector(xs, {2, n});
    const Tensor r = fft_compute(x, {FftKind::kRfft, {}, {}, ""}, w);
    EXPECT_EQ(r.sizes(), (Shape{2, n / 2 + 1}));
    EXPECT_EQ(r.dtype(), DType::kComplex128);
    const Tensor back = fft_compute(r, {FftKind::kIrfft, {n}, {}, ""}, w);
    EXPECT_EQ(back.dtype(), DType::kFloat64);
    EXPECT_LE(rel_error(back, x), 1e-12) << n;
    const Tensor c = fft_compute(x, {FftKind::kFftn, {}, {}, ""}, w);
    const Tensor ic = fft_compute(c, {FftKind::kIfftn, {}, {}, ""}, w);
    EXPECT_LE(rel_error(real_view(ic), real_view(x.to(DType::kComplex128))), 1e-12) << n;
  }
  const std::string e = error_of([&] { fft_compute(impulse, {FftKind::kFft, {}, {}, "bad"}, w); });
  EXPECT_NE(e.find("Invalid normalization mode"), std::string::npos) << e;
}

/// Deterministic complex values for input `sizes` of `dtype` (complex or real).
Tensor make_input(const Shape& sizes, DType dtype, uint32_t seed) {
  const DType work = is_complex(dtype) ? DType::kComplex128 : DType::kFloat64;
  Tensor t = Tensor::empty(sizes, work);
  const int64_t n = t.numel() * (is_complex(dtype) ? 2 : 1);
  auto* p = static_cast<double*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    p[i] = static_cast<double>(seed >> 8) / (1u << 24) * 4.0 - 2.0;
  }
  return t.to(dtype);
}

/// Compiles `text`, runs it and the interpreter on the same inputs, and compares every output
/// (complex ones on both parts) within `tol` relative.
void expect_compiled_matches_interpreter(const std::string& name, const std::string& text,
                                         const std::vector<Tensor>& ins, double tol) {
  const auto graph = ir::parse_graph(text);
  const Built& b = build_graph(name, *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model m = load(b);
  interp::Interpreter ref(*graph);
  const auto want = ref.run(ins);
  const auto got = m.run(ins);
  ASSERT_EQ(got.size(), want.size()) << name;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].dtype(), want[i].dtype()) << name << " output " << i;
    EXPECT_LE(rel_error(real_view(got[i]), real_view(want[i].contiguous())), tol)
        << name << " output " << i << " " << want[i].type_str() << "\n"
        << b.program_text;
  }
}

// Complex pointwise math on views inside the graph (a transposed operand, a slice, a real view
// of it), sub with alpha, mul by a float, abs, imag, div, and promotion c64 + c128 -> c128:
// compiled code equals the interpreter.
TEST(AotComplex, PointwiseOnViewsMatchesTheInterpreter) {
  const std::string text = R"(graph {
  inputs {
    %a: c64[4, 3] = user_input
    %b: c64[3, 4] = user_input
    %c: c128[4, 3] = user_input
  }
  %bt: c64[4, 3] = aten.permute.default(self=%b, dims=[1, 0])
  %s: c64[4, 3] = aten.sub.Tensor(self=%a, other=%bt, alpha=2)
  %m: c64[4, 3] = aten.mul.Tensor(self=%s, other=%bt)
  %k: c64[4, 3] = aten.mul.Tensor(self=%m, other=2.5)
  %sl: c64[4, 2] = aten.slice.Tensor(self=%k, dim=1, start=1, end=3)
  %r: f32[4, 2, 2] = aten.view_as_real.default(self=%sl)
  %ab: f32[4, 3] = aten.abs.default(self=%m)
  %w: c128[4, 3] = aten.add.Tensor(self=%c, other=%a)
  %im: f64[4, 3] = aten.imag.default(self=%w)
  %d: c128[4, 3] = aten.div.Tensor(self=%w, other=%c)
  %n: c128[4, 3] = aten.neg.default(self=%d)
  outputs {
    user_output %r
    user_output %ab
    user_output %im
    user_output %n
  }
})";
  expect_compiled_matches_interpreter(
      "complex_views", text,
      {make_input({4, 3}, DType::kComplex64, 1), make_input({3, 4}, DType::kComplex64, 2),
       make_input({4, 3}, DType::kComplex128, 3)},
      1e-6);
}

// complex32 arithmetic rounds through fp16 like the interpreter; c32 * c64 promotes to c64.
TEST(AotComplex, Complex32MathMatchesTheInterpreter) {
  const std::string text = R"(graph {
  inputs {
    %x: c32[5] = user_input
    %v: c64[5] = user_input
  }
  %y: c32[5] = aten.add.Tensor(self=%x, other=%x)
  %z: c64[5] = aten.mul.Tensor(self=%y, other=%v)
  %re: f16[5] = aten.real.default(self=%y)
  outputs {
    user_output %y
    user_output %z
    user_output %re
  }
})";
  expect_compiled_matches_interpreter(
      "complex32_math", text,
      {make_input({5}, DType::kComplex32, 4), make_input({5}, DType::kComplex64, 5)}, 1e-6);
}

// FFT externs with n / s / dim / norm attributes: rfft(n=8, dim=0, ortho) then irfft gives the
// input back; fftn with s and norm="forward"; ifft of a transposed complex input. The compiled
// extern and the interpreter share fft_compute, so both are checked against PyTorch's values
// (tests/fixtures/aot/fft_attrs.*.npy, scripts/export_fft_attrs.py), not against each other.
TEST(AotComplex, FftAttributesMatchPyTorch) {
  const std::string text = R"(graph {
  inputs {
    %x: f32[8, 6] = user_input
    %z: c64[6, 8] = user_input
  }
  %r: c64[5, 6] = aten.fft_rfft.default(self=%x, n=8, dim=0, norm="ortho")
  %i: f32[8, 6] = aten.fft_irfft.default(self=%r, n=8, dim=0, norm="ortho")
  %f: c64[4, 6] = aten.fft_fftn.default(self=%x, s=[4, 6], dim=[0, 1], norm="forward")
  %zt: c64[8, 6] = aten.permute.default(self=%z, dims=[1, 0])
  %g: c64[8, 6] = aten.fft_ifft.default(self=%zt, dim=0)
  outputs {
    user_output %i
    user_output %f
    user_output %g
  }
})";
  const std::vector<Tensor> ins = read_set("fft_attrs", "in", "");
  const std::vector<Tensor> want = read_set("fft_attrs", "out", "");
  ASSERT_EQ(ins.size(), 2u);
  ASSERT_EQ(want.size(), 3u);
  // the fixture's inputs are this file's generator's (so the graph text and the script agree)
  EXPECT_EQ(ins[0].to_doubles(), make_input({8, 6}, DType::kFloat32, 6).to_doubles());
  EXPECT_EQ(real_view(ins[1]).to_doubles(),
            real_view(make_input({6, 8}, DType::kComplex64, 7)).to_doubles());
  const auto graph = ir::parse_graph(text);
  const Built& b = build_graph("fft_attrs", *graph);
  ASSERT_TRUE(b.error.empty()) << b.error;
  runtime::Model m = load(b);
  interp::Interpreter ref(*graph);
  const std::vector<std::pair<const char*, std::vector<Tensor>>> runs = {
      {"compiled", m.run(ins)}, {"interpreter", ref.run(ins)}};
  for (const auto& [who, got] : runs) {
    ASSERT_EQ(got.size(), 3u) << who;
    for (size_t k = 0; k < 3; ++k) {
      EXPECT_EQ(got[k].dtype(), want[k].dtype()) << who << " output " << k;
      EXPECT_TRUE(::anvil::test::close(real_view(got[k].contiguous()),
                                       real_view(want[k]), 1e-5))
          << who << " output " << k << " " << want[k].type_str();
    }
  }
  EXPECT_LE(rel_error(runs[0].second[0], ins[0]), 1e-5) << "irfft(rfft(x)) gives x back";
}

/// A borrowed DLManagedTensor over a contiguous tensor's memory (no deleter).
struct DlView {
  DLManagedTensor m{};
  std::vector<int64_t> shape;
  DlView(const Tensor& t, DLDataType dtype) : shape(t.sizes()) {
    m.dl_tensor.data = t.data_ptr();
    m.dl_tensor.device = {kDLCPU, 0};
    m.dl_tensor.ndim = static_cast<int32_t>(shape.size());
    m.dl_tensor.dtype = dtype;
    m.dl_tensor.shape = shape.data();
  }
};

// The C API takes and returns complex32 / complex64 / complex128 as DLPack kDLComplex (32, 64
// and 128 bits) and runs case 77 through it.
TEST(AotComplex, C77_ThroughTheCApiWithDLPackComplex) {
  const Built& b = build("aot_77_complex_checks");
  ASSERT_TRUE(b.error.empty()) << b.error;
  anvil_model_t* model = nullptr;
  char* err = nullptr;
  ASSERT_EQ(anvil_model_load(b.package.c_str(), nullptr, &model, &err), 0) << (err ? err : "");
  const uint8_t bits[3] = {32, 64, 128};
  for (size_t i = 0; i < 3; ++i) {
    anvil_tensor_spec_t spec{};
    ASSERT_EQ(anvil_model_input_spec(model, i, &spec, nullptr), 0);
    EXPECT_EQ(spec.dtype.code, kDLComplex) << i;
    EXPECT_EQ(spec.dtype.bits, bits[i]) << i;
  }
  const auto ins = case77_inputs();
  DlView a(ins[0], {kDLComplex, 32, 1}), bb(ins[1], {kDLComplex, 64, 1}),
      c(ins[2], {kDLComplex, 128, 1});
  DLManagedTensor* inputs[3] = {&a.m, &bb.m, &c.m};
  DLManagedTensor** outputs = nullptr;
  size_t n_out = 0;
  ASSERT_EQ(anvil_model_run(model, inputs, 3, &outputs, &n_out, &err), 0) << (err ? err : "");
  ASSERT_EQ(n_out, 3u);
  const auto want = read_set("aot_77_complex_checks", "out", "");
  EXPECT_EQ(outputs[0]->dl_tensor.dtype.code, kDLComplex);
  EXPECT_EQ(outputs[0]->dl_tensor.dtype.bits, 32);
  EXPECT_EQ(std::memcmp(outputs[0]->dl_tensor.data, want[0].data_ptr(), 8), 0);
  EXPECT_EQ(outputs[1]->dl_tensor.dtype.bits, 64);
  EXPECT_EQ(std::memcmp(outputs[1]->dl_tensor.data, want[1].data_ptr(), 64), 0);
  EXPECT_EQ(outputs[2]->dl_tensor.dtype.bits, 128);
  EXPECT_EQ(outputs[2]->dl_tensor.ndim, 0);
  EXPECT_EQ(std::memcmp(outputs[2]->dl_tensor.data, want[2].data_ptr(), 16), 0);
  anvil_tensors_free(outputs, n_out);
  // complex64 where complex128 is expected: a clean error.
  DlView wrong(ins[1].slice(0, 0, 1).squeeze(0).contiguous(), {kDLComplex, 64, 1});
  DLManagedTensor* bad[3] = {&a.m, &bb.m, &wrong.m};
  EXPECT_NE(anvil_model_run(model, bad, 3, &outputs, &n_out, &err), 0);
  ASSERT_NE(err, nullptr);
  EXPECT_NE(std::string(err).find("c128"), std::string::npos) << err;
  anvil_free(err);
  anvil_model_free(model);
}

// torch.promote_types for complex dtypes (values printed by PyTorch), and complex32 element
// conversions through complex64.
TEST(AotComplex, PromotionAndComplex32Casts) {
  using D = DType;
  struct Row {
    D a, b, want;
  };
  for (const Row& r :
       {Row{D::kComplex32, D::kBool, D::kComplex32}, Row{D::kComplex32, D::kInt64, D::kComplex32},
        Row{D::kComplex32, D::kFloat16, D::kComplex32},
        Row{D::kComplex32, D::kBFloat16, D::kComplex64},
        Row{D::kComplex32, D::kFloat32, D::kComplex64},
        Row{D::kComplex32, D::kFloat64, D::kComplex128},
        Row{D::kComplex32, D::kComplex64, D::kComplex64},
        Row{D::kComplex32, D::kComplex128, D::kComplex128},
        Row{D::kComplex64, D::kFloat64, D::kComplex128},
        Row{D::kComplex64, D::kFloat16, D::kComplex64}}) {
    EXPECT_EQ(promote_types(r.a, r.b), r.want) << dtype_name(r.a) << " " << dtype_name(r.b);
    EXPECT_EQ(promote_types(r.b, r.a), r.want) << dtype_name(r.b) << " " << dtype_name(r.a);
  }
  EXPECT_TRUE(is_supported(D::kComplex32));
  EXPECT_EQ(dtype_size(D::kComplex32), 4u);
  const Tensor c64 =
      Tensor::from_vector(std::vector<std::complex<float>>{{1.5f, -2.0f}, {0.1f, 3.0f}});
  const Tensor c32 = c64.to(D::kComplex32);
  EXPECT_EQ(c32.dtype(), D::kComplex32);
  const Tensor back = c32.to(D::kComplex64);
  EXPECT_EQ(back.data<std::complex<float>>()[0], std::complex<float>(1.5f, -2.0f));
  EXPECT_NEAR(back.data<std::complex<float>>()[1].real(), 0.1f, 1e-4);  // rounded to fp16
  EXPECT_EQ(c32.to(D::kFloat32).to_doubles(),
            (std::vector<double>{1.5, static_cast<float>(static_cast<Half>(0.1f))}));
}

}  // namespace
}  // namespace anvil::aot_test
