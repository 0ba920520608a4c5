// The target registry (codegen/target.h).
#include "codegen/target.h"

#include <algorithm>
#include <mutex>

#include "core/error.h"

namespace anvil::codegen {

namespace {

struct Registry {
  std::mutex mu;
  std::vector<const Target*> targets;
  static Registry& get() {
    static Registry r;
    return r;
  }
};

}  // namespace

bool Target::serves(const std::string& target_name) const {
  const auto names = target_names();
  return std::find(names.begin(), names.end(), target_name) != names.end();
}

void register_target(const Target* target) {
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  for (const std::string& n : target->target_names())
    for (const Target* t : r.targets)
      ANVIL_CHECK(!t->serves(n), "register_target", "target name served twice",
                  "one target per name", n + " (" + t->name() + " and " + target->name() + ")");
  r.targets.push_back(target);
}

const Target& find_target(const std::string& target_name) {
  const std::string name = target_name.empty() ? "native" : target_name;
  {
    Registry& r = Registry::get();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const Target* t : r.targets)
      if (t->serves(name)) return *t;
  }
  std::string known;
  for (const std::string& n : target_names()) known += (known.empty() ? "" : ", ") + n;
  throw Error("unknown compile target", "codegen", known, name);
}

std::vector<std::string> target_names() {
  Registry& r = Registry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> out;
  for (const Target* t : r.targets)
    for (const std::string& n : t->target_names()) out.push_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

TargetInfo Target::describe(const std::string& target_name, const std::string&,
                           const std::string&) const {
  TargetInfo t;
  t.name = t.manifest_target = target_name;
  return t;
}

}  // namespace anvil::codegen
