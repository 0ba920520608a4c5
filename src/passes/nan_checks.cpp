// Which buffers the run's NaN / Inf check scans after each step (loop_ir.h nan_check_buffers).
#include <map>
#include <set>

#include "passes/collectives.h"
#include "passes/loop_ir.h"

namespace anvil::passes {

std::vector<std::vector<int>> nan_check_buffers(const Program& program) {
  const std::set<std::string> known(program.symbols.begin(), program.symbols.end());
  auto plain = [&](const SymInt& s) {  // uses the input symbols only
    std::set<std::string> used;
    s.collect_symbols(used);
    for (const std::string& u : used)
      if (!known.count(u)) return false;
    return true;
  };
  auto root = [&](int b) {
    for (int guard = 0; program.buffers[static_cast<size_t>(b)].alias_of >= 0 && guard < 64;
         ++guard)
      b = program.buffers[static_cast<size_t>(b)].alias_of;
    return b;
  };
  // The wait step of each collective id (the issue's writes are complete there).
  std::map<int, size_t> wait_of;
  for (size_t i = 0; i < program.steps.size(); ++i)
    if (const auto* e = std::get_if<ExternStep>(&program.steps[i]); e && is_collective_wait(*e))
      wait_of[collective_id(*e)] = i;
  std::map<int, size_t> last;  // buffer -> the step after which it is scanned
  for (size_t i = 0; i < program.steps.size(); ++i) {
    std::set<int> reads, writes;
    step_accesses(program, program.steps[i], reads, writes);
    size_t at = i;
    if (const auto* e = std::get_if<ExternStep>(&program.steps[i]); e && is_collective_issue(*e)) {
      auto w = wait_of.find(collective_id(*e));
      if (w == wait_of.end()) continue;
      at = w->second;
    }
    for (int b : writes) {
      auto [it, fresh] = last.emplace(b, at);
      if (!fresh && it->second < at) it->second = at;
    }
  }
  std::vector<std::vector<int>> out(program.steps.size());
  for (const auto& [b, step] : last) {
    const Buffer& buf = program.buffers[static_cast<size_t>(b)];
    const Buffer& mem = program.buffers[static_cast<size_t>(root(b))];
    if (!is_floating(buf.dtype) && !is_complex(buf.dtype)) continue;
    if (is_float8(buf.dtype) || buf.local || mem.local || buf.run_time_sized ||
        mem.run_time_sized || !plain(buf.numel))
      continue;
    if (mem.kind == BufferKind::kArena && !plain(mem.offset)) continue;
    out[step].push_back(b);
  }
  return out;
}

}  // namespace anvil::passes
