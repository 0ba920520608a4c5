// 0 / 1 environment switches (the ANVIL_CUDA_* and similar opt-ins and opt-outs of the compiler):
// one parse for all, so a typo ("true", "2", " 1") is an Error naming the variable instead of
// silently meaning on or off.
#pragma once

#include <optional>

namespace anvil {

/// The switch `name`: nullopt when it is unset or empty, true for "1", false for "0"; any other
/// value throws Error (what: the variable is not 0 or 1; expected "0 or 1"; actual: the value).
std::optional<bool> env_switch(const char* name);

/// env_switch(name), `unset` when it is unset or empty.
inline bool env_switch(const char* name, bool unset) { return env_switch(name).value_or(unset); }

}  // namespace anvil
