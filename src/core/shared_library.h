// Finding and opening anvil's own on-demand shared libraries (the device backends such as
// libanvil_cuda.so, the nccl process-group backend libanvil_nccl.so): one search, used by the
// runtime's device backends and by dist's backend loader, so CPU-only programs never load them.
#pragma once

#include <string>
#include <vector>

namespace anvil {

/// The folders looked in, in order: $ANVIL_DEVICE_BACKEND_DIR, the folder holding anvil's core
/// library and its ../lib, then the build tree's lib/ (tests, the CLI).
std::vector<std::string> anvil_library_dirs();

/// dlopens `file` (RTLD_NOW | RTLD_LOCAL) from the first of anvil_library_dirs() that has it,
/// else by name through the dynamic loader's search path. Returns the handle, or null with
/// `looked` naming every place tried and `error` the last dlerror() message (empty when the file
/// was nowhere).
void* open_anvil_library(const std::string& file, std::string& looked, std::string& error);

}  // namespace anvil
