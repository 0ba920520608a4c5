// Manifest::parse: manifest.json -> Manifest, with every field checked.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "runtime/package.h"

namespace anvil::runtime {

namespace {

using Json = nlohmann::json;

/// Field accessors that raise Error naming the package and the JSON path.
struct Reader {
  std::string where;

  [[noreturn]] void fail(const std::string& path, const std::string& expected,
                         const Json& got) const {
    std::string text = got.dump();
    if (text.size() > 80) text = text.substr(0, 77) + "...";
    throw Error(str("bad manifest field '", path, "'"), where, expected, text);
  }
  const Json& field(const Json& obj, const char* key, const std::string& path) const {
    auto it = obj.find(key);
    if (it == obj.end())
      throw Error(str("manifest is missing field '", path, "'"), where, "the field", "none");
    return *it;
  }
  int64_t integer(const Json& j, const std::string& path) const {
    if (j.is_number_integer()) return j.get<int64_t>();
    if (j.is_number_unsigned() && j.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX))
      return static_cast<int64_t>(j.get<uint64_t>());
    fail(path, "an integer", j);
  }
  uint64_t unsigned_int(const Json& j, const std::string& path) const {
    if (j.is_number_unsigned()) return j.get<uint64_t>();
    if (j.is_number_integer() && j.get<int64_t>() >= 0)
      return static_cast<uint64_t>(j.get<int64_t>());
    fail(path, "a non-negative integer", j);
  }
  std::string string(const Json& j, const std::string& path) const {
    if (!j.is_string()) fail(path, "a string", j);
    return j.get<std::string>();
  }
  const Json& array(const Json& j, const std::string& path) const {
    if (!j.is_array()) fail(path, "an array", j);
    return j;
  }
  DType dtype(const Json& j, const std::string& path) const {
    try {
      if (j.is_string()) return dtype_from_name(j.get<std::string>());
      if (j.is_number_integer()) return dtype_from_code(j.get<int64_t>());
    } catch (const Error&) {
    }
    fail(path, "a dtype name such as \"f32\"", j);
  }
  /// A symbol bound: an integer, or null / "inf" / "int_oo" for unbounded.
  int64_t bound(const Json& j, const std::string& path) const {
    if (j.is_null()) return SymRange::kSymMax;
    if (j.is_string()) {
      const std::string s = j.get<std::string>();
      if (s == "inf" || s == "int_oo" || s == "oo") return SymRange::kSymMax;
    }
    return integer(j, path);
  }
  Shape int_list(const Json& j, const std::string& path) const {
    Shape out;
    for (size_t i = 0; i < array(j, path).size(); ++i)
      out.push_back(integer(j[i], str(path, "[", i, "]")));
    return out;
  }
  std::vector<std::string> string_list(const Json& j, const std::string& path) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < array(j, path).size(); ++i)
      out.push_back(string(j[i], str(path, "[", i, "]")));
    return out;
  }
};

TensorSpec parse_tensor_spec(const Reader& r, const Json& j, const std::string& path,
                             const std::set<std::string>& symbols) {
  if (!j.is_object()) r.fail(path, "an object", j);
  TensorSpec spec;
  spec.name = r.string(r.field(j, "name", path + ".name"), path + ".name");
  spec.dtype = r.dtype(r.field(j, "dtype", path + ".dtype"), path + ".dtype");
  const Json& sizes = r.array(r.field(j, "sizes", path + ".sizes"), path + ".sizes");
  if (sizes.size() > 8) r.fail(path + ".sizes", "at most 8 dims", sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    const std::string p = str(path, ".sizes[", d, "]");
    if (sizes[d].is_string()) {
      SymInt s;
      try {
        s = SymInt::parse(sizes[d].get<std::string>());
      } catch (const Error&) {
        r.fail(p, "an int or a SymInt expression", sizes[d]);
      }
      std::set<std::string> used;
      s.collect_symbols(used);
      for (const std::string& name : used)
        if (!symbols.count(name))
          throw Error(str("size uses undeclared symbol '", name, "'"), r.where + ": " + p,
                      "a symbol listed in 'symbols'", name);
      spec.sizes.push_back(s);
    } else {
      const int64_t v = r.integer(sizes[d], p);
      if (v < 0) r.fail(p, "a size >= 0", sizes[d]);
      spec.sizes.push_back(SymInt(v));
    }
  }
  return spec;
}

/// An int or a SymInt expression (text) at `path`.
SymInt sym_field(const Reader& r, const Json& j, const std::string& path) {
  if (j.is_number_integer() || j.is_number_unsigned()) return SymInt(r.integer(j, path));
  try {
    return SymInt::parse(r.string(j, path));
  } catch (const Error&) {
    r.fail(path, "an int or a SymInt expression", j);
  }
}

/// One entry of "kernels"[i]."checks" (the NaN / Inf check's buffers).
BufferCheck parse_check(const Reader& r, const Json& j, const std::string& path) {
  if (!j.is_object()) r.fail(path, "an object", j);
  BufferCheck c;
  c.buffer = r.string(r.field(j, "buffer", path + ".buffer"), path + ".buffer");
  if (j.contains("nodes"))
    for (const auto& n : r.string_list(j["nodes"], path + ".nodes"))
      c.nodes += (c.nodes.empty() ? "" : ", ") + n;
  const std::string mem = r.string(r.field(j, "memory", path + ".memory"), path + ".memory");
  if (mem == "input")
    c.memory = BufferCheck::Memory::kInput;
  else if (mem == "output")
    c.memory = BufferCheck::Memory::kOutput;
  else if (mem == "constant")
    c.memory = BufferCheck::Memory::kConstant;
  else if (mem == "arena")
    c.memory = BufferCheck::Memory::kArena;
  else
    r.fail(path + ".memory", "input, output, constant or arena", j["memory"]);
  if (c.memory == BufferCheck::Memory::kArena)
    c.offset = sym_field(r, r.field(j, "offset", path + ".offset"), path + ".offset");
  else
    c.index = r.integer(r.field(j, "index", path + ".index"), path + ".index");
  c.dtype = r.dtype(r.field(j, "dtype", path + ".dtype"), path + ".dtype");
  c.numel = sym_field(r, r.field(j, "numel", path + ".numel"), path + ".numel");
  if (j.contains("sizes")) {
    const Json& sizes = r.array(j["sizes"], path + ".sizes");
    for (size_t d = 0; d < sizes.size(); ++d)
      c.sizes.push_back(sym_field(r, sizes[d], str(path, ".sizes[", d, "]")));
  }
  return c;
}

}  // namespace

std::vector<std::string> TensorSpec::size_strings() const {
  std::vector<std::string> out;
  for (const SymInt& s : sizes) out.push_back(s.str());
  return out;
}

int Manifest::symbol_index(const std::string& name) const {
  for (size_t i = 0; i < symbols.size(); ++i)
    if (symbols[i].name == name) return static_cast<int>(i);
  return -1;
}

Manifest Manifest::parse(const std::string& text, const std::string& where) {
  const Reader r{where.empty() ? std::string("manifest.json") : where + ": manifest.json"};
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    throw Error("manifest.json is not valid JSON", r.where, "a JSON object", e.what());
  }
  if (!j.is_object()) r.fail("<root>", "a JSON object", j);

  Manifest m;
  m.json = text;
  m.format_version = r.integer(r.field(j, "format_version", "format_version"), "format_version");
  if (m.format_version > kPackageFormatVersion)
    throw Error(str("package format version ", m.format_version,
                    " is newer than this runtime supports; update anvil or recompile the model"),
                r.where, str("format_version <= ", kPackageFormatVersion),
                std::to_string(m.format_version));
  if (m.format_version < 1)
    throw Error("bad package format version", r.where, "format_version >= 1",
                std::to_string(m.format_version));
  m.abi_version = r.integer(r.field(j, "abi_version", "abi_version"), "abi_version");
  if (j.contains("anvil_version")) m.anvil_version = r.string(j["anvil_version"], "anvil_version");
  m.target = r.string(r.field(j, "target", "target"), "target");
  if (j.contains("cpu_features")) m.cpu_features = r.string_list(j["cpu_features"], "cpu_features");
  if (j.contains("device")) {
    const std::string d = r.string(j["device"], "device");
    if (d == "cuda")
      m.device_type = Device::Type::kCUDA;
    else if (d != "cpu")
      throw Error("unknown package device", r.where + ": device", "cpu or cuda", d);
  }
  if (j.contains("cuda_min_capability"))
    m.cuda_min_capability = r.integer(j["cuda_min_capability"], "cuda_min_capability");
  if (j.contains("externs")) m.externs = r.string_list(j["externs"], "externs");
  if (j.contains("graph_capturable")) {
    if (!j["graph_capturable"].is_boolean())
      r.fail("graph_capturable", "true or false", j["graph_capturable"]);
    m.graph_capturable = j["graph_capturable"].get<bool>();
  }
  if (j.contains("host_steps")) m.host_steps = r.array(j["host_steps"], "host_steps").size();
  if (j.contains("kernels")) {
    const Json& arr = r.array(j["kernels"], "kernels");
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = str("kernels[", i, "]");
      if (!arr[i].is_object()) r.fail(p, "an object", arr[i]);
      KernelSpec k;
      k.name = r.string(r.field(arr[i], "name", p + ".name"), p + ".name");
      if (arr[i].contains("kind")) k.kind = r.string(arr[i]["kind"], p + ".kind");
      if (arr[i].contains("nodes"))
        for (const auto& n : r.string_list(arr[i]["nodes"], p + ".nodes"))
          k.nodes += (k.nodes.empty() ? "" : ", ") + n;
      if (arr[i].contains("bytes")) {
        const Json& b = arr[i]["bytes"];
        if (b.is_number_integer())
          k.bytes = SymInt(b.get<int64_t>());
        else
          k.bytes = SymInt::parse(r.string(b, p + ".bytes"));
      }
      if (arr[i].contains("checks")) {
        const Json& checks = r.array(arr[i]["checks"], p + ".checks");
        for (size_t c = 0; c < checks.size(); ++c)
          k.checks.push_back(parse_check(r, checks[c], str(p, ".checks[", c, "]")));
      }
      m.kernels.push_back(std::move(k));
    }
  }
  if (j.contains("planned_peak_bytes")) {
    const Json& p = j["planned_peak_bytes"];
    m.planned_peak_bytes = p.is_string() ? p.get<std::string>() : p.dump();
  }

  std::set<std::string> symbol_names;
  if (j.contains("symbols")) {
    const Json& syms = r.array(j["symbols"], "symbols");
    for (size_t i = 0; i < syms.size(); ++i) {
      const std::string p = str("symbols[", i, "]");
      if (!syms[i].is_object()) r.fail(p, "an object", syms[i]);
      SymbolSpec s;
      s.name = r.string(r.field(syms[i], "name", p + ".name"), p + ".name");
      s.range.min = syms[i].contains("min") ? r.bound(syms[i]["min"], p + ".min") : 0;
      s.range.max =
          syms[i].contains("max") ? r.bound(syms[i]["max"], p + ".max") : SymRange::kSymMax;
      if (s.range.min > s.range.max || s.range.min < 0)
        throw Error("bad symbol range", r.where + ": " + p, "0 <= min <= max", s.range.str());
      if (!symbol_names.insert(s.name).second)
        throw Error("duplicate symbol", r.where + ": " + p, "unique names", s.name);
      m.symbols.push_back(s);
    }
  }
  std::set<std::string> output_symbols = symbol_names;
  if (j.contains("run_time_symbols")) {
    const Json& syms = r.array(j["run_time_symbols"], "run_time_symbols");
    for (size_t i = 0; i < syms.size(); ++i) {
      const std::string p = str("run_time_symbols[", i, "]");
      if (!syms[i].is_object()) r.fail(p, "an object", syms[i]);
      const std::string name = r.string(r.field(syms[i], "name", p + ".name"), p + ".name");
      if (!output_symbols.insert(name).second)
        throw Error("duplicate symbol", r.where + ": " + p, "unique names", name);
      m.run_time_symbols.push_back(name);
    }
  }
  for (const char* key : {"inputs", "outputs"}) {
    const bool is_input = std::string(key) == "inputs";
    auto& list = is_input ? m.inputs : m.outputs;
    if (!j.contains(key)) continue;
    const Json& arr = r.array(j[key], key);
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = str(key, "[", i, "]");
      list.push_back(parse_tensor_spec(r, arr[i], p, is_input ? symbol_names : output_symbols));
      if (is_input && arr[i].contains("mutated")) {
        const Json& m = arr[i]["mutated"];
        if (!m.is_boolean()) r.fail(p + ".mutated", "true or false", m);
        list.back().mutated = m.get<bool>();
      }
    }
  }
  if (j.contains("constants")) {
    const Json& arr = r.array(j["constants"], "constants");
    std::set<std::string> names;
    for (size_t i = 0; i < arr.size(); ++i) {
      const std::string p = str("constants[", i, "]");
      const Json& c = arr[i];
      if (!c.is_object()) r.fail(p, "an object", c);
      ConstantSpec s;
      s.name = r.string(r.field(c, "name", p + ".name"), p + ".name");
      if (!names.insert(s.name).second)
        throw Error("duplicate constant name", r.where + ": " + p, "unique names", s.name);
      s.original_name = c.contains("original_name") && !c["original_name"].is_null()
                            ? r.string(c["original_name"], p + ".original_name")
                            : s.name;
      s.kind = c.contains("kind") ? r.string(c["kind"], p + ".kind") : "constant";
      s.dtype = r.dtype(r.field(c, "dtype", p + ".dtype"), p + ".dtype");
      s.sizes = r.int_list(r.field(c, "sizes", p + ".sizes"), p + ".sizes");
      // Every element's byte offset must fit in 63 bits (checked before any stride is formed).
      int64_t span = static_cast<int64_t>(dtype_size(s.dtype));
      for (int64_t v : s.sizes) {
        if (v < 0) r.fail(p + ".sizes", "sizes >= 0", c["sizes"]);
        if (__builtin_mul_overflow(span, std::max<int64_t>(v, 1), &span))
          r.fail(p + ".sizes", "a tensor of fewer than 2^63 bytes", c["sizes"]);
      }
      s.strides = c.contains("strides") ? r.int_list(c["strides"], p + ".strides")
                                        : Tensor::contiguous_strides(s.sizes);
      if (s.strides.size() != s.sizes.size())
        r.fail(p + ".strides", str(s.sizes.size(), " strides"), c["strides"]);
      s.offset = r.unsigned_int(r.field(c, "offset", p + ".offset"), p + ".offset");
      s.nbytes = r.unsigned_int(r.field(c, "nbytes", p + ".nbytes"), p + ".nbytes");
      if (c.contains("mutable")) {
        if (!c["mutable"].is_boolean()) r.fail(p + ".mutable", "true or false", c["mutable"]);
        s.is_mutable = c["mutable"].get<bool>();
      }
      // nbytes must be exactly the bytes the sizes and strides reach (dtype size x numel for
      // the contiguous constants write_package stores), computed without overflow.
      uint64_t last = 0;  // the highest element index reached
      bool empty = false, overflow = false;
      for (size_t d = 0; d < s.sizes.size(); ++d) {
        if (s.strides[d] < 0) r.fail(p + ".strides", "strides >= 0", c["strides"]);
        if (s.sizes[d] == 0) empty = true;
        const uint64_t reach = static_cast<uint64_t>(std::max<int64_t>(s.sizes[d] - 1, 0));
        uint64_t step = 0;
        overflow |= __builtin_mul_overflow(reach, static_cast<uint64_t>(s.strides[d]), &step) ||
                    __builtin_add_overflow(last, step, &last);
      }
      uint64_t need = 0;
      if (!empty &&
          (overflow || __builtin_add_overflow(last, 1, &need) ||
           __builtin_mul_overflow(need, static_cast<uint64_t>(dtype_size(s.dtype)), &need) ||
           need > static_cast<uint64_t>(INT64_MAX)))
        r.fail(p + ".strides", "a layout within 2^63 bytes",
               Json{{"sizes", c["sizes"]}, {"strides", c.value("strides", Json())}});
      if (s.nbytes != need)
        throw Error(str("constant's nbytes ", s.nbytes < need ? "is smaller than" : "exceeds",
                        " what its dtype and sizes need"),
                    r.where + ": " + p + " ('" + s.name + "')",
                    str(need, " bytes (", dtype_name(s.dtype), " ", shape_str(s.sizes), ")"),
                    std::to_string(s.nbytes));
      m.constants.push_back(s);
    }
  }
  return m;
}

}  // namespace anvil::runtime
