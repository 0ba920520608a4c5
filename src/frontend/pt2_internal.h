// Private pieces of the .pt2 reader: a checked view of JSON values that names archive, entry and
// field in every error, the torch.export leaf decoders (dtypes, devices, symbolic ints), and the
// steps load_pt2 runs (model.json -> Graph, weights -> Graph::constants).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/symint.h"
#include "core/zip_reader.h"
#include "ir/graph.h"

namespace anvil::frontend::detail {

using Json = nlohmann::json;

/// The archive and entry a JSON document came from.
struct JsonSource {
  std::string archive;
  std::string entry;  // relative to the archive's folder: "models/model.json"
  /// "ARCHIVE: ENTRY: PATH".
  std::string where(const std::string& path) const;
};

/// Parses `text` (the content of src.entry); throws Error naming the entry and the offset.
Json parse_json(const std::string& text, const JsonSource& src);

/// A JSON value together with the path that reached it. Typed accessors throw Error naming the
/// archive, the entry and the path ("graph_module.graph.nodes[3].inputs[0].arg").
class JField {
 public:
  JField(const Json& j, const JsonSource& src, std::string path)
      : j_(&j), src_(&src), path_(std::move(path)) {}

  const Json& json() const { return *j_; }
  const std::string& path() const { return path_; }
  const JsonSource& source() const { return *src_; }
  std::string where() const { return src_->where(path_); }
  bool is_null() const { return j_->is_null(); }

  /// Required member `key` of an object.
  JField at(const std::string& key) const;
  /// Member `key` when present and not null.
  std::optional<JField> get(const std::string& key) const;
  /// Elements of an array.
  std::vector<JField> items() const;
  /// Members of an object, in key order.
  std::vector<std::pair<std::string, JField>> members() const;
  /// The one member of a torch.export union ({"as_tensor": {...}}).
  std::pair<std::string, JField> union_member() const;
  /// A copy whose path reads `label` instead (used to name nodes by their export name).
  JField relabel(std::string label) const { return JField(*j_, *src_, std::move(label)); }

  int64_t as_int() const;
  /// Numbers, plus the strings "Infinity", "-Infinity" and "NaN" the exporter writes.
  double as_double() const;
  bool as_bool() const;
  const std::string& as_string() const;
  void expect_object() const;
  void expect_array() const;

  /// Throws Error located at this field.
  [[noreturn]] void fail(const std::string& what, const std::string& expected,
                         const std::string& actual) const;
  /// "object", "string", "integer", ...
  std::string type_name() const;

 private:
  const Json* j_;
  const JsonSource* src_;
  std::string path_;
};

/// A ScalarType code as DType; unknown codes raise Error at `f` (float8 codes are accepted).
DType decode_dtype(const JField& f);
/// {"type": "cpu", "index": null} as Device.
Device decode_device(const JField& f);
/// A SymInt union ({"as_int": n} or {"as_expr": {"expr_str": ...}}).
SymInt decode_sym_int(const JField& f);
/// Parses an export expression string after checking that folding it cannot overflow or blow up.
SymInt parse_sym_expr(const std::string& text, const JField& f);

/// Builds the graph from models/model.json: inputs with their signature, nodes, value types,
/// outputs, symbol ranges and attributes. Unsupported targets raise one Error listing them all.
std::unique_ptr<ir::Graph> build_graph(const Json& model, const JsonSource& src);

/// A name not used yet in `g` / `names`, starting from `want` (pt2_hops.cpp).
std::string fresh_name(const ir::Graph& g, const std::set<std::string>& names,
                       const std::string& want);
/// Called for each node an inliner copies, its arguments already remapped into `g` and its
/// outputs not yet made: may append nodes to `g` before it (casts) and edit its arguments.
using InlineHook = std::function<void(const ir::Node& original, ir::Node& copy)>;
/// Appends the nodes of `sub` to `g` reading `operands` for its inputs; returns the values of
/// its outputs (null for a None output). Node and value names get `prefix`; `names` are the node
/// names taken so far; errors name `where` (pt2_hops.cpp).
std::vector<ir::Value*> inline_graph(ir::Graph& g, const ir::Graph& sub,
                                     const std::vector<ir::Value*>& operands,
                                     const std::string& prefix, std::set<std::string>& names,
                                     const std::string& where, const InlineHook& hook = {});

/// Appends the nodes of a higher_order.wrap_with_autocast region `hop` (not itself in `g`) to
/// `g`, with the casts CPU autocast applies made explicit, or those of a
/// higher_order.wrap_with_set_grad_enabled region unchanged (pt2_autocast.cpp); returns the
/// values of the region's outputs. `node_names` are the names taken so far.
std::vector<ir::Value*> inline_region(ir::Graph& g, const ir::Node& hop,
                                      std::set<std::string>& node_names);

/// Names of the positional arguments of higher_order.map_impl (body, xs, args),
/// invoke_subgraph (subgraph, identifier, then arg0, ...) and auto_functionalized / _v2 (op),
/// which the importer inlines (pt2_hops.cpp); null for other targets.
const std::vector<std::string>* inlined_hop_arg_names(const std::string& target);
/// Appends the nodes of higher-order op `hop` (map_impl, invoke_subgraph, auto_functionalized /
/// _v2; not itself in `g`) to `g` and returns the values of its `n_outputs` outputs (null for a
/// None output). Throws Error at the node for what cannot be inlined: torch.map over a dynamic
/// leading size, a custom op under auto_functionalized (its kernel is user Python).
std::vector<ir::Value*> inline_hop(ir::Graph& g, const ir::Node& hop, size_t n_outputs,
                                   std::set<std::string>& node_names);

/// The native `_c10d_functional` target of a legacy `c10d_functional` collective (canonical
/// target, without "torch.ops."), or null (pt2_legacy.cpp).
const char* native_collective(const std::string& target);
/// Rewrites the arguments of `node`, parsed from a legacy collective `legacy_target`, into the
/// native op's: the trailing (tag, ranks, group_size) become a group_name that the group
/// registry resolves at run time, reduceOp becomes reduce_op, the tensor argument is renamed.
void rewrite_legacy_collective(ir::Node& node, const std::string& legacy_target,
                               const JField& where);

/// Where the weights and constants of an archive live.
struct PayloadEntries {
  const ZipReader* zip = nullptr;
  std::string prefix;  // archive folder, "mlp_small/"
};

/// Reads data/weights and data/constants into graph.constants for every parameter, buffer and
/// tensor constant of the signature, checking dtype, sizes and file lengths.
void load_payloads(ir::Graph& graph, const PayloadEntries& where);

}  // namespace anvil::frontend::detail
