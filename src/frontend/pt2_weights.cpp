// data/weights and data/constants of a .pt2 archive -> Graph::constants.
#include <memory>

#include "core/storage.h"
#include "core/tensor.h"
#include "core/zip_directory.h"
#include "frontend/pt2_internal.h"

namespace anvil::frontend::detail {
namespace {

/// One payload config (data/weights/model_weights_config.json or the constants one).
struct PayloadConfig {
  std::string dir;  // "data/weights/"
  JsonSource src;
  Json json;
  std::optional<JField> config;  // the "config" object, when the entry exists
};

void open_config(PayloadConfig& c, const PayloadEntries& w, const std::string& dir,
                 const std::string& file) {
  c.dir = dir;
  c.src = JsonSource{w.zip->name(), dir + file};
  const ZipEntry* e = w.zip->find(w.prefix + dir + file);
  if (!e) return;
  c.json = parse_json(w.zip->read(*e), c.src);
  JField root(c.json, c.src, "");
  c.config.emplace(root.at("config"));
  c.config->expect_object();
}

/// Exact layout of one payload, from its tensor_meta.
struct Layout {
  DType dtype;
  Shape sizes, strides;
  int64_t offset = 0;
};

int64_t const_int(const JField& f, const char* what) {
  SymInt v = decode_sym_int(f);
  if (!v.is_constant())
    f.fail(str("symbolic ", what, " in a stored tensor"), "an integer", v.str());
  return v.constant();
}

Layout decode_layout(const JField& meta) {
  meta.expect_object();
  Layout l;
  l.dtype = decode_dtype(meta.at("dtype"));
  for (const JField& s : meta.at("sizes").items()) {
    int64_t v = const_int(s, "size");
    if (v < 0) s.fail("negative size", "a size >= 0", std::to_string(v));
    l.sizes.push_back(v);
  }
  JField strides = meta.at("strides");
  for (const JField& s : strides.items()) {
    int64_t v = const_int(s, "stride");
    if (v < 0) s.fail("negative stride", "a stride >= 0", std::to_string(v));
    l.strides.push_back(v);
  }
  if (l.strides.size() != l.sizes.size())
    strides.fail("strides and sizes differ in length", str(l.sizes.size(), " strides"),
                 std::to_string(l.strides.size()));
  if (auto off = meta.get("storage_offset")) {
    l.offset = const_int(*off, "storage offset");
    if (l.offset < 0) off->fail("negative storage offset", ">= 0", std::to_string(l.offset));
  }
  return l;
}

/// Bytes of storage the layout reaches (0 for an empty tensor); fails on overflow.
uint64_t bytes_needed(const Layout& l, const JField& meta) {
  for (int64_t s : l.sizes)
    if (s == 0) return 0;
  const auto overflow = [&] {
    meta.fail("tensor layout overflows", "sizes, strides and offset within 2^63 bytes",
              str("sizes ", shape_str(l.sizes), ", strides ", shape_str(l.strides)));
  };
  int64_t last = l.offset;  // the highest element index reached
  for (size_t i = 0; i < l.sizes.size(); ++i) {
    int64_t step;
    if (__builtin_mul_overflow(l.sizes[i] - 1, l.strides[i], &step) ||
        __builtin_add_overflow(last, step, &last))
      overflow();
  }
  int64_t bytes;
  if (__builtin_mul_overflow(last + 1, static_cast<int64_t>(dtype_size(l.dtype)), &bytes))
    overflow();
  return static_cast<uint64_t>(bytes);
}

}  // namespace

void load_payloads(ir::Graph& graph, const PayloadEntries& w) {
  PayloadConfig weights, constants;
  open_config(weights, w, "data/weights/", "model_weights_config.json");
  open_config(constants, w, "data/constants/", "model_constants_config.json");
  std::map<std::string, std::shared_ptr<Storage>> storages;  // by entry: tied weights share

  for (const ir::InputSpec& spec : graph.input_specs()) {
    if (spec.kind != ir::InputKind::kParameter && spec.kind != ir::InputKind::kBuffer &&
        spec.kind != ir::InputKind::kConstant)
      continue;
    if (graph.constants.count(spec.target)) continue;  // two inputs naming one tensor
    // Parameters and persistent buffers live with the weights, the rest with the constants;
    // look in both.
    PayloadConfig* cfg = nullptr;
    std::optional<JField> entry;
    for (PayloadConfig* c : {&weights, &constants}) {
      if (c->config && (entry = c->config->get(spec.target))) {
        cfg = c;
        break;
      }
    }
    if (!cfg) {
      const char* what = spec.kind == ir::InputKind::kParameter ? "parameter"
                         : spec.kind == ir::InputKind::kBuffer  ? "buffer"
                                                                : "tensor constant";
      std::string where = w.zip->name() + ": " + weights.src.entry;
      if (!weights.config && !constants.config)
        where += " (missing, and so is " + constants.src.entry + ")";
      throw Error(str("no stored data for ", what, " '", spec.target, "'"), where,
                  "an entry in data/weights or data/constants", "none");
    }
    entry->expect_object();
    if (entry->at("use_pickle").as_bool())
      entry->fail("pickled payloads are not supported", "raw tensor data (use_pickle false)",
                  "use_pickle true");
    auto meta = entry->get("tensor_meta");
    if (!meta) entry->fail("payload has no tensor_meta", "a tensor", "a custom object");
    Layout l = decode_layout(*meta);

    // The stored tensor must be what the graph's placeholder says it is.
    const ir::TensorType& want = spec.value->type;
    bool same = want.dtype == l.dtype && want.sizes.size() == l.sizes.size();
    for (size_t i = 0; same && i < l.sizes.size(); ++i) same = want.sizes[i] == SymInt(l.sizes[i]);
    if (!same)
      meta->fail("stored tensor does not match graph input '" + spec.value->name + "'", want.str(),
                 str(dtype_name(l.dtype), shape_str(l.sizes)));

    JField path = entry->at("path_name");
    const std::string& file = path.as_string();
    // A payload is a file of the config's own folder: a name with '/', '..' or NUL could name
    // another entry (or, for a reader that extracts, a path outside its folder).
    std::string problem = zip_entry_name_problem(file);
    if (problem.empty() && file.find('/') != std::string::npos) problem = "a '/'";
    if (!problem.empty())
      path.fail("unsafe payload file name: it has " + problem,
                "a file name in " + cfg->dir + " (no '/', '..', '\\' or NUL)",
                Json(file).dump(-1, ' ', true, Json::error_handler_t::replace));
    const std::string zip_name = w.prefix + cfg->dir + file;
    const ZipEntry* ze = w.zip->find(zip_name);
    if (!ze)
      path.fail("missing payload file " + cfg->dir + file, "the entry in the archive", "none");
    uint64_t need = bytes_needed(l, *meta);
    if (ze->size < need)
      throw Error("payload file too short for its tensor", w.zip->name() + ": " + cfg->dir + file,
                  str(need, " bytes for ", dtype_name(l.dtype), shape_str(l.sizes), " strides ",
                      shape_str(l.strides), " offset ", l.offset),
                  str(ze->size, " bytes"));
    auto& storage = storages[zip_name];
    if (!storage) {
      storage = Storage::allocate(static_cast<size_t>(ze->size));
      w.zip->read_into(*ze, storage->data());
    }
    graph.constants[spec.target] = Tensor(storage, l.dtype, l.sizes, l.strides, l.offset);
  }
}

}  // namespace anvil::frontend::detail
