// C++ for collective steps (passes/collectives.h), emitted inline in run(): an issue step fills
// descriptors and stores the handle of api->coll_issue_stream in coll_h[id]; a wait step calls
// api->coll_wait_stream on it once (the waits of a bucket share one handle: the first releases
// it). Both pass the run's stream (s.stream), so a device group orders the collective after the
// work queued on it and makes the stream, not the host, wait. A runtime older than ABI minor 7
// gets the stream-less coll_issue / coll_wait (it orders on the run's stream itself).
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cpu {

int max_collective_id(const passes::Program& p) {
  int n = -1;
  for (const auto& st : p.steps)
    if (const auto* e = std::get_if<passes::ExternStep>(&st))
      if (passes::is_collective_issue(*e) || passes::is_collective_wait(*e))
        n = std::max(n, passes::collective_id(*e));
  return n;
}

std::string emit_collective_step(const passes::Program& p, const passes::ExternStep& e) {
  const int id = passes::collective_id(e);
  const std::string h = "coll_h[" + std::to_string(id) + "]";
  std::ostringstream body;
  std::string nodes;
  for (size_t i = 0; i < e.nodes.size(); ++i) nodes += (i ? ", " : "") + e.nodes[i];
  if (passes::is_collective_wait(e)) {
    body << "  // " << e.name << ": wait (" << nodes << ")\n";
    body << "  if (" << h << " != 0) {\n";
    body << "    if ((s.api->abi_minor_version >= 7 ? s.api->coll_wait_stream(s.run_ctx, " << h
         << ", s.stream)\n"
         << "                                       : s.api->coll_wait(s.run_ctx, " << h
         << ")) != 0)\n"
         << "      return 1;\n";
    body << "    " << h << " = 0;\n  }\n";
    return body.str();
  }
  const std::string op = e.target.substr(std::string(passes::kCollectivePrefix).size());
  std::ostringstream inner;
  const size_t ni = e.inputs.size(), no = e.outputs.size();
  inner << "    AnvilRtTensor in[" << std::max<size_t>(ni, 1) << "] = {};\n";
  inner << "    AnvilRtTensor out[" << std::max<size_t>(no, 1) << "] = {};\n";
  for (size_t i = 0; i < ni; ++i)
    inner << rt_tensor_desc(p, "in[" + std::to_string(i) + "]", e.inputs[i], "    ",
                            "codegen/cpu " + e.name);
  for (size_t i = 0; i < no; ++i)
    inner << rt_tensor_desc(p, "out[" + std::to_string(i) + "]", e.outputs[i], "    ",
                            "codegen/cpu " + e.name);
  std::vector<const passes::ExternAttr*> attrs;
  for (const auto& a : e.attrs)
    if (a.name != "coll" && a.name != "group") attrs.push_back(&a);
  inner << "    AnvilRtScalar at[" << std::max<size_t>(attrs.size(), 1) << "] = {};\n";
  for (size_t i = 0; i < attrs.size(); ++i) {
    const auto& a = *attrs[i];
    const std::string t = "at[" + std::to_string(i) + "]";
    inner << "    " << t << ".name = " << quoted(a.name) << ";\n";
    inner << "    " << t << ".kind = " << a.kind << ";\n";
    if (a.kind == 0) inner << "    " << t << ".i = " << a.i.str() << ";\n";
    if (a.kind == 2) inner << "    " << t << ".s = " << quoted(a.s) << ";\n";
    if (a.kind == 3) {
      inner << "    const int64_t ints" << i << "[" << std::max<size_t>(a.ints.size(), 1) << "] = {";
      for (size_t k = 0; k < a.ints.size(); ++k) inner << (k ? ", " : "") << a.ints[k].str();
      inner << "};\n";
      inner << "    " << t << ".ints = ints" << i << ";\n";
      inner << "    " << t << ".n_ints = " << a.ints.size() << ";\n";
    }
  }
  const std::string args = quoted(op) + ", " + quoted(passes::collective_attr(e, "group")) +
                           ", in, " + std::to_string(ni) + ", out, " + std::to_string(no) +
                           ", at, " + std::to_string(attrs.size()) + ")";
  inner << "    " << h << " = s.api->abi_minor_version >= 7\n"
        << "        ? s.api->coll_issue_stream(s.run_ctx, s.stream, " << args << "\n"
        << "        : s.api->coll_issue(s.run_ctx, " << args << ";\n";
  inner << "    if (" << h << " == 0) return 1;\n";
  body << "  {  // " << e.name << ": issue " << op << " on group '"
       << passes::collective_attr(e, "group") << "' (" << nodes << ")\n";
  body << symbol_decls(p, inner.str(), "s.sym", "    ");
  body << inner.str() << "  }\n";
  return body.str();
}

}  // namespace anvil::codegen::cpu
