// Kernel de-duplication: step functions (loop kernels, GEMMs) whose emitted C++ is identical up
// to the function name, the buffer base expressions (s.in[i], s.out[i], s.cst[i],
// (s.arena + (offset))) and the names of the buffer pointers (p<root>) get one shared
// implementation that takes the base pointers as parameters; each original step function
// becomes a forwarder with the same signature, so run() is unchanged. Works on the emitted text
// (emit_kernel.cpp / emit_steps.cpp): a kernel whose text does not have the expected shape is
// simply kept as it is.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>

#include "codegen/cpu/emit_cpu.h"
#include "codegen/text_util.h"

namespace anvil::codegen::cpu {

namespace {

/// One occurrence of a buffer base expression in a text.
struct BaseRef {
  size_t pos = 0;
  size_t len = 0;
  std::string expr;
};

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

/// Every buffer base expression of `text` (codegen/cpu buffer_base), in order.
std::vector<BaseRef> find_bases(const std::string& text) {
  std::vector<BaseRef> out;
  size_t i = 0;
  while (i < text.size()) {
    if (i > 0 && is_ident_char(text[i - 1])) {
      ++i;
      continue;
    }
    bool found = false;
    for (const char* head : {"s.in[", "s.out[", "s.cst["}) {
      const std::string h = head;
      if (text.compare(i, h.size(), h) != 0) continue;
      size_t j = i + h.size();
      while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) != 0) ++j;
      if (j > i + h.size() && j < text.size() && text[j] == ']') {
        out.push_back({i, j + 1 - i, text.substr(i, j + 1 - i)});
        i = j + 1;
        found = true;
      }
      break;
    }
    if (found) continue;
    const std::string arena = "(s.arena + (";
    if (text.compare(i, arena.size(), arena) == 0) {
      int depth = 0;
      size_t j = i;
      for (; j < text.size(); ++j) {
        if (text[j] == '(') ++depth;
        if (text[j] == ')' && --depth == 0) break;
      }
      if (j < text.size()) {
        out.push_back({i, j + 1 - i, text.substr(i, j + 1 - i)});
        i = j + 1;
        continue;
      }
    }
    ++i;
  }
  return out;
}

/// `text` with every occurrence of `from` replaced by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (size_t pos = text.find(from); pos != std::string::npos;
       pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
  return text;
}

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) lines.push_back(l);
  return lines;
}

/// True for a symbol declaration line of symbol_decls (`  const int64_t s7 = s.sym[0];`).
bool is_symbol_decl(const std::string& line) {
  LineScanner c(line);
  c.eat_blanks();
  if (!c.eat("const int64_t ") || !c.eat_ident() || !c.eat(" = s.")) return false;
  c.eat("u");
  return c.eat("sym[") && c.eat_digits() && c.eat("];") && c.done();
}

/// A pointer line of a loop kernel's chunk function:
/// `  TYPE* __restrict pN = reinterpret_cast<TYPE2*>(BASE);  // comment`.
struct PtrLine {
  std::string type, name, cast_type, base;
};
bool parse_ptr_line(const std::string& line, PtrLine& out) {
  auto type_char = [](char ch) { return is_ident_char(ch) || ch == ':'; };
  LineScanner c(line);
  std::string digits;
  if (!c.eat("  ") || !c.eat_while(type_char, &out.type) || !c.eat("* __restrict p") ||
      !c.eat_digits(&digits) || !c.eat(" = reinterpret_cast<") ||
      !c.eat_while(type_char, &out.cast_type) || !c.eat("*>(") ||
      !c.eat_until_last(");  // ", &out.base))
    return false;
  out.name = "p" + digits;
  return true;
}

/// A step function split for de-duplication.
struct Parsed {
  bool ok = false;
  bool is_loop = false;
  std::string key;                  // normalised text: equal keys = same computation
  std::vector<std::string> bases;   // the base expressions, in parameter order
  std::vector<std::string> shared;  // loop: body lines of the first member (decls stripped)
  std::string header;               // the "// NAME: ..." comment line
};

/// `p<digits>` pointer names of a line renamed through `rename` (assigning new numbers in
/// order of first use); `out_prefix` names the renamed pointers.
std::string rename_pointers(const std::string& line, std::map<std::string, int>& rename,
                            const std::string& out_prefix) {
  std::string out;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == 'p' && (i == 0 || !is_ident_char(line[i - 1])) && i + 1 < line.size() &&
        std::isdigit(static_cast<unsigned char>(line[i + 1])) != 0) {
      size_t j = i + 1;
      while (j < line.size() && std::isdigit(static_cast<unsigned char>(line[j])) != 0) ++j;
      if (j == line.size() || !is_ident_char(line[j])) {
        const std::string tok = line.substr(i, j - i);
        auto it = rename.find(tok);
        if (it == rename.end())
          it = rename.emplace(tok, static_cast<int>(rename.size())).first;
        out += out_prefix + std::to_string(it->second);
        i = j;
        continue;
      }
    }
    out += line[i++];
  }
  return out;
}

/// GEMM: "// header", "ANVIL_HIDDEN int NAME(const RunState& s) {", body (bases inline).
Parsed parse_gemm(const std::string& name, const std::string& text) {
  Parsed r;
  std::vector<std::string> lines = split_lines(text);
  if (lines.size() < 3 || !starts_with(lines[0], "// ") ||
      lines[1] != "ANVIL_HIDDEN int " + name + "(const RunState& s) {")
    return r;
  r.header = lines[0];
  std::string body;
  for (size_t i = 2; i < lines.size(); ++i)
    if (!is_symbol_decl(lines[i])) body += lines[i] + "\n";
  if (body.find(name) != std::string::npos) return r;
  std::map<std::string, int> index;
  std::string key;
  size_t last = 0;
  for (const BaseRef& b : find_bases(body)) {
    auto it = index.find(b.expr);
    if (it == index.end()) {
      it = index.emplace(b.expr, static_cast<int>(r.bases.size())).first;
      r.bases.push_back(b.expr);
    }
    key += body.substr(last, b.pos - last) + "shared_ptrs[" + std::to_string(it->second) + "]";
    last = b.pos + b.len;
  }
  key += body.substr(last);
  if (r.bases.empty() || key.find("s.arena") != std::string::npos) return r;
  r.shared = {key};
  r.key = "gemm\n" + key;
  r.ok = true;
  return r;
}

/// Loop kernel (emit_loop_kernel): header, NAME_chunk with its pointer lines, NAME.
Parsed parse_loop(const std::string& name, const std::string& text) {
  Parsed r;
  r.is_loop = true;
  std::vector<std::string> lines = split_lines(text);
  if (lines.size() < 4 || !starts_with(lines[0], "// ") ||
      lines[1] != "static void " + name + "_chunk(void* ctx, int64_t begin, int64_t end) {" ||
      lines[2] != "  const RunState& s = *static_cast<const RunState*>(ctx);")
    return r;
  r.header = lines[0];
  struct Ptr {
    std::string type, name, base;
  };
  std::vector<Ptr> ptrs;
  std::vector<std::string> rest;  // lines after the pointer lines, decls stripped
  bool outer_seen = false;
  for (size_t i = 3; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (is_symbol_decl(l)) continue;
    PtrLine m;
    if (rest.empty() && parse_ptr_line(l, m)) {
      const auto refs = find_bases(m.base);
      if (m.type != m.cast_type || refs.size() != 1 || refs[0].len != m.base.size()) return r;
      ptrs.push_back({m.type, m.name, m.base});
      continue;
    }
    if (l == "ANVIL_HIDDEN void " + name + "(const RunState& s) {") {
      outer_seen = true;
      rest.push_back("@OUTER@");
      continue;
    }
    rest.push_back(replace_all(l, name + "_chunk", "@CHUNK@"));
  }
  if (!outer_seen || ptrs.empty()) return r;
  std::string rest_text;
  for (const auto& l : rest) rest_text += l + "\n";
  if (rest_text.find(name) != std::string::npos || !find_bases(rest_text).empty() ||
      rest_text.find("s.arena") != std::string::npos)
    return r;
  // pointers numbered by first use in the body
  std::map<std::string, int> rename;
  std::string key_rest;
  for (const auto& l : rest) key_rest += rename_pointers(l, rename, "P") + "\n";
  for (const Ptr& q : ptrs)
    if (!rename.count(q.name)) rename.emplace(q.name, static_cast<int>(rename.size()));
  if (rename.size() != ptrs.size()) return r;  // a pointer name not declared here
  std::vector<std::string> key_ptrs(ptrs.size());
  r.bases.assign(ptrs.size(), "");
  for (const Ptr& q : ptrs) {
    const int k = rename.at(q.name);
    key_ptrs[static_cast<size_t>(k)] = q.type + " P" + std::to_string(k);
    r.bases[static_cast<size_t>(k)] = q.base;
  }
  r.key = "loop\n";
  for (const auto& k : key_ptrs) r.key += k + "\n";
  r.key += key_rest;
  // the shared chunk's pointer lines, with this kernel's pointer names
  for (const Ptr& q : ptrs)
    r.shared.push_back("  " + q.type + "* __restrict " + q.name + " = reinterpret_cast<" +
                       q.type + "*>(shared_ctx.ptrs[" + std::to_string(rename.at(q.name)) +
                       "]);");
  r.shared.push_back("@PTRS_END@");
  for (const auto& l : rest) r.shared.push_back(l);
  r.ok = true;
  return r;
}

std::string join_names(const std::vector<const StepFunctionText*>& members) {
  std::string s;
  for (size_t i = 0; i < members.size(); ++i) s += (i ? ", " : "") + members[i]->name;
  return s;
}

/// The shared implementation `shared` of a group (from its first member's parse).
std::string shared_body(const passes::Program& p, const Parsed& first,
                        const std::vector<const StepFunctionText*>& members,
                        const std::string& shared) {
  std::ostringstream os;
  os << "// " << shared << ": one implementation of " << join_names(members) << " ("
     << first.header.substr(3) << ")\n";
  if (!first.is_loop) {
    const std::string& body = first.shared[0];
    os << "static int " << shared << "(const RunState& s, void* const* shared_ptrs) {\n";
    os << symbol_decls(p, body, "s.sym", "  ") << body << "\n";
    return os.str();
  }
  // loop kernel: chunk function (pointers through the context) + driver
  std::string chunk, outer;
  bool in_outer = false;
  for (const auto& l : first.shared) {
    if (l == "@PTRS_END@") continue;
    if (l == "@OUTER@") {
      in_outer = true;
      continue;
    }
    std::string t = replace_all(l, "@CHUNK@", shared + "_chunk");
    t = replace_all(t, "const_cast<RunState*>(&s)", "const_cast<" + shared + "_ctx*>(&shared_ctx)");
    (in_outer ? outer : chunk) += t + "\n";
  }
  os << "struct " << shared << "_ctx {\n  const RunState* s;\n  void* const* ptrs;\n};\n\n";
  os << "static void " << shared << "_chunk(void* ctx, int64_t begin, int64_t end) {\n";
  os << "  const " << shared << "_ctx& shared_ctx = *static_cast<const " << shared
     << "_ctx*>(ctx);\n";
  os << "  const RunState& s = *shared_ctx.s;\n";
  os << symbol_decls(p, chunk, "s.sym", "  ") << chunk;
  os << "static void " << shared << "(const RunState& s, void* const* shared_ptrs) {\n";
  os << symbol_decls(p, outer, "s.sym", "  ");
  os << "  const " << shared << "_ctx shared_ctx{&s, shared_ptrs};\n";
  os << outer << "\n";
  return os.str();
}

/// The original step function `m`, forwarding its base pointers to `shared`.
std::string forwarder(const passes::Program& p, const StepFunctionText& m, const Parsed& parsed,
                      const std::string& shared) {
  std::string ptrs;
  for (size_t i = 0; i < parsed.bases.size(); ++i)
    ptrs += (i ? ", " : "") + std::string("static_cast<void*>(") + parsed.bases[i] + ")";
  std::ostringstream os;
  os << parsed.header << " -> " << shared << "\n";
  os << "ANVIL_HIDDEN " << (parsed.is_loop ? "void " : "int ") << m.name
     << "(const RunState& s) {\n";
  os << symbol_decls(p, ptrs, "s.sym", "  ");
  os << "  void* const shared_ptrs[] = {" << ptrs << "};\n";
  os << "  " << (parsed.is_loop ? "" : "return ") << shared << "(s, shared_ptrs);\n";
  os << "}\n";
  return os.str();
}

}  // namespace

DedupResult dedup_step_functions(const passes::Program& p,
                                 const std::vector<StepFunctionText>& steps, int& next_shared) {
  DedupResult out;
  std::vector<Parsed> parsed(steps.size());
  // Steps are grouped by the structure of their loop IR (passes::structural_key). The normalised
  // text is what the shared body is built from; a member whose text does not normalise to the
  // group's (it would not fit the shared body) stays on its own.
  std::map<std::string, std::vector<size_t>> groups;  // key -> members, in step order
  for (size_t i = 0; i < steps.size(); ++i) {
    const StepFunctionText& s = steps[i];
    if (!s.step) continue;
    if (s.kind == StepFunctionText::Kind::kLoop) parsed[i] = parse_loop(s.name, s.text);
    if (s.kind == StepFunctionText::Kind::kGemm) parsed[i] = parse_gemm(s.name, s.text);
    if (!parsed[i].ok) continue;
    const std::string structure = passes::structural_key(p, *s.step);
    if (structure.empty()) continue;
    parsed[i].key = structure + "\n--\n" + parsed[i].key;
    groups[parsed[i].key].push_back(i);
  }
  std::set<std::string> names;
  for (const auto& s : p.steps) names.insert(passes::step_name(s));
  for (const auto& s : steps) names.insert(s.name);
  std::set<size_t> done;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (done.count(i)) continue;
    const auto g = parsed[i].ok ? groups.find(parsed[i].key) : groups.end();
    if (g == groups.end() || g->second.size() < 2) {
      out.units.push_back(steps[i].text);
      ++out.kernel_bodies;
      continue;
    }
    std::string shared;
    do {
      shared = "kshared" + std::to_string(next_shared++);
    } while (names.count(shared));
    std::vector<const StepFunctionText*> members;
    for (size_t m : g->second) members.push_back(&steps[m]);
    std::string unit = shared_body(p, parsed[i], members, shared);
    for (size_t m : g->second) {
      unit += "\n" + forwarder(p, steps[m], parsed[m], shared);
      done.insert(m);
    }
    out.units.push_back(unit);
    ++out.kernel_bodies;
    out.kernels_shared += static_cast<int>(g->second.size()) - 1;
  }
  return out;
}

}  // namespace anvil::codegen::cpu
