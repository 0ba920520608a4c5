// load_pt2: finds the pieces of a torch.export archive and hands them to the JSON and weight
// readers (pt2_graph.cpp, pt2_weights.cpp).
#include "frontend/pt2_reader.h"

#include <cctype>

#include "core/zip_reader.h"
#include "frontend/pt2_internal.h"

namespace anvil::frontend {
namespace {

constexpr const char* kModelEntry = "models/model.json";
constexpr uint64_t kMaxJsonBytes = uint64_t{1} << 30;

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::unique_ptr<ir::Graph> load_archive(const ZipReader& zip, const LoadOptions& options) {
  const ZipEntry* model = zip.find_suffix(kModelEntry);
  if (!model) {
    std::string seen;
    for (size_t i = 0; i < zip.entries().size() && i < 5; ++i)
      seen += (i ? ", " : "") + zip.entries()[i].name;
    if (zip.entries().size() > 5) seen += ", ...";
    throw Error("not a torch.export archive: no models/model.json", zip.name(),
                "an entry <folder>/models/model.json",
                seen.empty() ? std::string("an empty archive") : seen);
  }
  const std::string prefix =
      model->name.substr(0, model->name.size() - std::string(kModelEntry).size());
  if (const ZipEntry* bo = zip.find(prefix + "byteorder")) {
    ANVIL_CHECK(bo->size <= 64, zip.name() + ": byteorder", "unreadable byte order", "little",
                str(bo->size, " bytes"));
    std::string order = trim(zip.read(*bo));
    ANVIL_CHECK(order == "little", zip.name() + ": byteorder", "unsupported byte order", "little",
                order);
  }
  detail::JsonSource src{zip.name(), kModelEntry};
  ANVIL_CHECK(model->size <= kMaxJsonBytes, src.where(""), "model description too large",
              "at most 1 GiB", str(model->size, " bytes"));
  std::unique_ptr<ir::Graph> graph;
  try {
    detail::Json json = detail::parse_json(zip.read(*model), src);
    graph = detail::build_graph(json, src);
    if (options.load_weights) detail::load_payloads(*graph, {&zip, prefix});
  } catch (const detail::Json::exception& e) {
    // The accessors check types first; this only guards against a path they missed.
    throw Error("malformed JSON content", zip.name(), "fields of the types torch.export writes",
                e.what());
  }
  if (!prefix.empty()) graph->attributes["archive_folder"] = prefix.substr(0, prefix.size() - 1);
  return graph;
}

}  // namespace

std::unique_ptr<ir::Graph> load_pt2(const std::string& path, const LoadOptions& options) {
  ZipReader zip = ZipReader::open(path);
  return load_archive(zip, options);
}

std::unique_ptr<ir::Graph> load_pt2_bytes(const std::string& bytes, const std::string& name,
                                          const LoadOptions& options) {
  ZipReader zip = ZipReader::from_bytes(bytes, name);
  return load_archive(zip, options);
}

}  // namespace anvil::frontend
