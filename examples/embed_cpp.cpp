// embed_cpp.cpp — run a compiled .anvil package through anvil's public C++ API (anvil/anvil.h)
// on .npy inputs, and compare its outputs with expected .npy files.
//
//   example_embed_cpp MODEL.anvil IN0.npy [IN1.npy ...] [--want OUT0.npy [OUT1.npy ...]]
//                     [--device cpu|cuda|cuda:N]
//
// Prints the model's inputs and outputs, runs it once, and prints each output's shape and first
// values. With --want, each output is compared with the expected array (anvil's tolerance:
// max|got - want| <= 1e-4 * max(1, max|want|) for floats, exact for integers); the exit status
// is 1 when one differs. Reads .npy files of little-endian float32/float64/int64/int32/bool,
// C order — what PyTorch fixtures and `anvil run` write.
#include <anvil/anvil.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

/// A .npy array: its dtype, shape and raw bytes.
struct Npy {
  DLDataType dtype{};
  std::vector<int64_t> shape;
  std::vector<char> bytes;
};

/// The value of `key` in a .npy header dict ("'descr': '<f4'" -> "<f4", shape -> "(8, 256)").
std::string header_field(const std::string& h, const std::string& key) {
  const size_t k = h.find("'" + key + "'");
  if (k == std::string::npos) throw anvil::api::Error(key + ": missing in the .npy header");
  size_t v = h.find(':', k) + 1;
  while (h[v] == ' ') ++v;
  if (h[v] == '\'') return h.substr(v + 1, h.find('\'', v + 1) - v - 1);  // a string, unquoted
  if (h[v] == '(') return h.substr(v, h.find(')', v) - v + 1);            // a tuple
  return h.substr(v, h.find_first_of(",}", v) - v);                       // True, False, numbers
}

Npy read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw anvil::api::Error(path + ": cannot open");
  std::vector<char> all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (all.size() < 12 || std::memcmp(all.data(), "\x93NUMPY", 6) != 0)
    throw anvil::api::Error(path + ": not a .npy file");
  const bool v1 = all[6] == 1;
  const size_t len = v1 ? (uint8_t(all[8]) | uint8_t(all[9]) << 8)
                        : (uint8_t(all[8]) | uint8_t(all[9]) << 8 | uint8_t(all[10]) << 16);
  const size_t start = (v1 ? 10 : 12) + len;
  const std::string h(all.data() + (v1 ? 10 : 12), len);
  if (header_field(h, "fortran_order").find("True") != std::string::npos)
    throw anvil::api::Error(path + ": Fortran order is not supported");
  Npy a;
  const std::string descr = header_field(h, "descr");
  if (descr == "<f4")
    a.dtype = anvil::api::dtype_of<float>();
  else if (descr == "<f8")
    a.dtype = anvil::api::dtype_of<double>();
  else if (descr == "<i8")
    a.dtype = anvil::api::dtype_of<int64_t>();
  else if (descr == "<i4")
    a.dtype = anvil::api::dtype_of<int32_t>();
  else if (descr == "|b1")
    a.dtype = anvil::api::dtype_of<bool>();
  else
    throw anvil::api::Error(path + ": unsupported dtype " + descr);
  const std::string shape = header_field(h, "shape");
  for (size_t i = 1; i < shape.size();) {
    const size_t j = shape.find_first_of(",)", i);
    const std::string dim = shape.substr(i, j - i);
    if (dim.find_first_not_of(' ') != std::string::npos) a.shape.push_back(std::stoll(dim));
    i = j + 1;
  }
  a.bytes.assign(all.begin() + static_cast<std::ptrdiff_t>(start), all.end());
  return a;
}

/// Element k of `data` (of `dtype`) as a double.
double element(const void* data, DLDataType dtype, int64_t k) {
  if (dtype.code == kDLFloat && dtype.bits == 32) return static_cast<const float*>(data)[k];
  if (dtype.code == kDLFloat && dtype.bits == 64) return static_cast<const double*>(data)[k];
  if (dtype.bits == 64) return static_cast<double>(static_cast<const int64_t*>(data)[k]);
  if (dtype.bits == 32) return static_cast<const int32_t*>(data)[k];
  return static_cast<const uint8_t*>(data)[k];
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d) s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

int run(int argc, char** argv) {
  std::vector<std::string> ins, wants;
  anvil::api::LoadOptions options;
  for (int i = 2, want = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--want") == 0)
      want = 1;
    else if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc)
      options.device = argv[++i];
    else
      (want ? wants : ins).push_back(argv[i]);
  }
  const anvil::api::Model model = anvil::api::Model::load(argv[1], options);
  std::printf("model %s\n", argv[1]);
  for (const auto& s : model.input_specs()) {
    std::printf("  input %s [", s.name.c_str());
    for (size_t d = 0; d < s.sizes.size(); ++d)
      std::printf("%s%s", d ? ", " : "", s.sizes[d].c_str());
    std::printf("]\n");
  }
  std::vector<Npy> arrays;
  for (const auto& path : ins) arrays.push_back(read_npy(path));
  std::vector<anvil::api::TensorView> views;
  for (Npy& a : arrays) {
    anvil::api::TensorView v;
    v.data = a.bytes.data();
    v.dtype = a.dtype;
    v.shape = a.shape;
    views.push_back(v);
  }
  const std::vector<anvil::api::Tensor> outs = model.run(views);
  int status = 0;
  for (size_t i = 0; i < outs.size(); ++i) {
    const anvil::api::Tensor& t = outs[i];
    const void* data = static_cast<const char*>(t.dl().data) + t.dl().byte_offset;
    std::printf("  output %zu: %s", i, shape_text(t.shape()).c_str());
    for (int64_t k = 0; k < t.numel() && k < 4; ++k)
      std::printf(" %g", element(data, t.dtype(), k));
    std::printf(t.numel() > 4 ? " ...\n" : "\n");
    if (i >= wants.size()) continue;
    const Npy want = read_npy(wants[i]);
    if (want.shape != t.shape()) {
      std::printf("  output %zu: MISMATCH: shape %s, want %s\n", i, shape_text(t.shape()).c_str(),
                  shape_text(want.shape).c_str());
      status = 1;
      continue;
    }
    double scale = 1, err = 0;
    for (int64_t k = 0; k < t.numel(); ++k) {
      const double w = element(want.bytes.data(), want.dtype, k);
      scale = std::max(scale, std::fabs(w));
      const double d = std::fabs(element(data, t.dtype(), k) - w);
      err = std::isnan(d) ? INFINITY : std::max(err, d);
    }
    const double bound = t.dtype().code == kDLFloat ? 1e-4 * scale : 0.0;
    const bool ok = err <= bound;
    std::printf("  output %zu: %s: max|got - want| = %g (bound %g)\n", i, ok ? "match" : "MISMATCH",
                err, bound);
    if (!ok) status = 1;
  }
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s MODEL.anvil IN0.npy ... [--want OUT0.npy ...] [--device D]\n",
                 argv[0]);
    return 2;
  }
  try {
    return run(argc, argv);
  } catch (const anvil::api::Error& e) {  // anvil's message: input, dim, expected, actual
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
