// Control-flow steps (passes/lower_control.cpp): "anvil.cond" runs one of two compiled
// sub-programs, "anvil.while" runs the condition and the body sub-programs until the condition
// is false. Each sub-program is emitted like the model itself (its kernels in the kernel
// translation units, a run function calling them in order) and is called with a RunState over
// the parent's buffers: its inputs are the operands, its outputs the result buffers (or the
// loop's other state copy), its arena the step's scratch buffer.
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "core/error.h"
#include "passes/collectives.h"

namespace anvil::codegen::cpu {

namespace {

using passes::ExternStep;
using passes::Program;

/// Bytes of a contiguous view.
std::string view_bytes(const passes::TensorView& v) {
  std::string n = std::to_string(dtype_size(v.dtype));
  for (const auto& s : v.sizes) n += " * (" + s.str() + ")";
  return n;
}

/// `const int64_t VAR[] = {...}` with sub-program `sub`'s symbols (named like the parent's).
std::string sub_symbols(const Program& sub, const std::string& var, const std::string& ind) {
  if (sub.symbols.empty()) return ind + "const int64_t* " + var + " = nullptr;\n";
  std::string out = ind + "const int64_t " + var + "[" + std::to_string(sub.symbols.size()) + "] = {";
  for (size_t i = 0; i < sub.symbols.size(); ++i) out += (i ? ", " : "") + sub.symbols[i];
  return out + "};\n";
}

void check_shape(const ExternStep& e, bool ok) {
  if (!ok) throw Error("malformed control-flow step", "codegen/cpu " + e.name);
}

std::string emit_cond(const Program& p, const ExternStep& e) {
  check_shape(e, e.subprograms.size() == 2 && !e.outputs.empty());
  const auto* cond = passes::find_attr(e, "condition");
  const size_t first_operand = cond ? 0 : 1;
  check_shape(e, e.inputs.size() >= first_operand);
  std::ostringstream b;
  const size_t ni = e.inputs.size() - first_operand, no = e.outputs.size() - 1;
  for (const auto& sub : e.subprograms)
    check_shape(e, sub->outputs.size() == no && sub->inputs.size() == ni);
  b << "  void* in[" << std::max<size_t>(ni, 1) << "] = {";
  for (size_t i = 0; i < ni; ++i) b << (i ? ", " : "") << view_data(p, e.inputs[first_operand + i]);
  b << "};\n  void* out[" << std::max<size_t>(no, 1) << "] = {";
  for (size_t i = 0; i < no; ++i) b << (i ? ", " : "") << view_data(p, e.outputs[i]);
  b << "};\n";
  b << "  char* scratch = static_cast<char*>(" << view_data(p, e.outputs.back()) << ");\n";
  if (cond) {
    b << "  const bool pred = (" << cond->s << ");\n";
  } else {
    const passes::TensorView& v = e.inputs[0];
    b << "  " << storage_type(v.dtype) << " pred_value{};\n";
    b << "  if (anvil_fetch(s, &pred_value, " << view_data(p, v) << ") != 0) return 1;\n";
    b << "  const bool pred = pred_value != 0;\n";
  }
  for (int branch = 0; branch < 2; ++branch) {
    const std::string ind = branch == 0 ? "    " : "  ";
    if (branch == 0) b << "  if (pred) {\n";
    b << sub_symbols(*e.subprograms[branch], "sym", ind);
    b << ind << "const RunState t{s.api, s.run_ctx, sym, in, out, nullptr, scratch, nullptr, nullptr, "
         "s.stream};\n";
    b << ind << "return " << sub_program_name(e, branch) << "(t);\n";
    if (branch == 0) b << "  }\n";
  }
  return b.str();
}

std::string emit_while(const Program& p, const ExternStep& e) {
  check_shape(e, e.subprograms.size() == 2 && !e.outputs.empty());
  const size_t nc = e.outputs.size() - 1;
  check_shape(e, e.inputs.size() >= nc && passes::find_attr(e, "pred_off"));
  const size_t na = e.inputs.size() - nc;
  check_shape(e, e.subprograms[0]->outputs.size() == 1 && e.subprograms[1]->outputs.size() == nc &&
                     e.subprograms[0]->inputs.size() == nc + na &&
                     e.subprograms[1]->inputs.size() == nc + na);
  std::ostringstream b;
  b << "  char* scratch = static_cast<char*>(" << view_data(p, e.outputs.back()) << ");\n";
  b << "  void* a[" << std::max<size_t>(nc, 1) << "] = {";
  for (size_t i = 0; i < nc; ++i) b << (i ? ", " : "") << view_data(p, e.outputs[i]);
  b << "};\n  const int64_t bytes[" << std::max<size_t>(nc, 1) << "] = {";
  for (size_t i = 0; i < nc; ++i) b << (i ? ", " : "") << view_bytes(e.outputs[i]);
  b << "};\n  void* cur[" << std::max<size_t>(nc + na, 1) << "] = {};\n";
  b << "  void* nxt[" << std::max<size_t>(nc, 1) << "] = {};\n";
  for (size_t i = 0; i < nc; ++i) {
    const auto* off = passes::find_attr(e, "carry_off", i);
    check_shape(e, off != nullptr);
    b << "  if (anvil_copy(s, a[" << i << "], " << view_data(p, e.inputs[i])
      << ", static_cast<size_t>(bytes[" << i << "])) != 0) return 1;\n";
    b << "  cur[" << i << "] = a[" << i << "];\n";
    b << "  nxt[" << i << "] = scratch + (" << off->i.str() << ");\n";
  }
  for (size_t j = 0; j < na; ++j)
    b << "  cur[" << nc + j << "] = " << view_data(p, e.inputs[nc + j]) << ";\n";
  b << "  void* pred_out[1] = {scratch + (" << passes::find_attr(e, "pred_off")->i.str() << ")};\n";
  b << sub_symbols(*e.subprograms[0], "sym_c", "  ");
  b << sub_symbols(*e.subprograms[1], "sym_b", "  ");
  b << "  for (;;) {\n";
  b << "    const RunState c{s.api, s.run_ctx, sym_c, cur, pred_out, nullptr, scratch, nullptr, "
       "nullptr, s.stream};\n";
  b << "    int rc = " << sub_program_name(e, 0) << "(c);\n";
  b << "    if (rc != 0) return rc;\n";
  b << "    unsigned char go = 0;\n";
  b << "    if (anvil_fetch(s, &go, pred_out[0]) != 0) return 1;\n";
  b << "    if (go == 0) break;\n";
  b << "    const RunState t{s.api, s.run_ctx, sym_b, cur, nxt, nullptr, scratch, nullptr, nullptr, "
       "s.stream};\n";
  b << "    rc = " << sub_program_name(e, 1) << "(t);\n";
  b << "    if (rc != 0) return rc;\n";
  b << "    for (int i = 0; i < " << nc << "; ++i) {\n";
  b << "      void* x = cur[i];\n      cur[i] = nxt[i];\n      nxt[i] = x;\n    }\n";
  b << "  }\n";
  b << "  for (int i = 0; i < " << nc << "; ++i)\n";
  b << "    if (cur[i] != a[i] && anvil_copy(s, a[i], cur[i], static_cast<size_t>(bytes[i])) != 0)\n";
  b << "      return 1;\n";
  b << "  return 0;\n";
  return b.str();
}

}  // namespace

bool is_control_step(const passes::Step& step) {
  const auto* e = std::get_if<ExternStep>(&step);
  return e && (e->target == "anvil.cond" || e->target == "anvil.while");
}

std::string sub_program_name(const ExternStep& e, size_t i) {
  return e.name + "_sub" + std::to_string(i);
}

std::string emit_control_step(const Program& p, const ExternStep& e) {
  const std::string body = e.target == "anvil.cond" ? emit_cond(p, e) : emit_while(p, e);
  std::ostringstream fn;
  fn << "// " << e.name << ": " << e.target << " (";
  for (size_t i = 0; i < e.nodes.size(); ++i) fn << (i ? ", " : "") << e.nodes[i];
  fn << ")\n";
  fn << "ANVIL_HIDDEN int " << e.name << "(const RunState& s) {\n";
  fn << symbol_decls(p, body, "s.sym", "  ");
  fn << body << "}\n";
  return fn.str();
}

std::string emit_run_steps(const Program& p, const std::string& indent) {
  std::ostringstream os;
  for (const auto& step : p.steps) {
    const std::string name = passes::step_name(step);
    if (std::holds_alternative<passes::LoopKernel>(step))
      os << indent << name << "(s);\n";
    else
      os << indent << "if ((rc = " << name << "(s)) != 0) return rc;\n";
  }
  return os.str();
}

void for_each_subprogram(const Program& p,
                         const std::function<void(const Program&, const std::string&)>& fn) {
  for (const auto& step : p.steps) {
    if (!is_control_step(step)) continue;
    const auto& e = std::get<ExternStep>(step);
    for (size_t i = 0; i < e.subprograms.size(); ++i) {
      fn(*e.subprograms[i], sub_program_name(e, i));
      for_each_subprogram(*e.subprograms[i], fn);
    }
  }
}

std::string emit_control_functions(const Program& p) {
  std::ostringstream decls, defs;
  std::function<void(const Program&)> control_steps = [&](const Program& q) {
    for (const auto& step : q.steps)
      if (is_control_step(step)) defs << emit_control_step(q, std::get<ExternStep>(step)) << "\n";
  };
  control_steps(p);
  for_each_subprogram(p, [&](const Program& sub, const std::string& name) {
    for (const auto& step : sub.steps) {
      const char* ret = std::holds_alternative<passes::LoopKernel>(step) ? "void" : "int";
      decls << "ANVIL_HIDDEN " << ret << " " << passes::step_name(step) << "(const RunState& s);\n";
    }
    decls << "ANVIL_HIDDEN int " << name << "(const RunState& s);\n";
    defs << "// " << name << ": a compiled subgraph\n";
    defs << "ANVIL_HIDDEN int " << name << "(const RunState& s) {\n  int rc = 0;\n";
    defs << emit_run_steps(sub, "  ");
    defs << "  (void)s;\n  return rc;\n}\n\n";
    control_steps(sub);
  });
  if (decls.str().empty() && defs.str().empty()) return "";
  return decls.str() + "\n" + defs.str();
}

}  // namespace anvil::codegen::cpu
