// anvil_library_dirs / open_anvil_library (core/shared_library.h).
#include "core/shared_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>

namespace anvil {

namespace fs = std::filesystem;

std::vector<std::string> anvil_library_dirs() {
  std::vector<std::string> dirs;
  if (const char* d = std::getenv("ANVIL_DEVICE_BACKEND_DIR"); d && *d) dirs.emplace_back(d);
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&anvil_library_dirs), &info) && info.dli_fname) {
    std::error_code ec;
    const fs::path self = fs::canonical(fs::path(info.dli_fname), ec);
    if (!ec) {
      dirs.push_back(self.parent_path().string());
      // An installed tree: the CLI's private libraries in lib/anvil/, libanvil_cuda.so in lib/.
      if (self.parent_path().filename() == "anvil")
        dirs.push_back(self.parent_path().parent_path().string());
      dirs.push_back((self.parent_path().parent_path() / "lib").string());
    }
  }
#ifdef ANVIL_DEVICE_BACKEND_BUILD_DIR
  dirs.emplace_back(ANVIL_DEVICE_BACKEND_BUILD_DIR);
#endif
  return dirs;
}

void* open_anvil_library(const std::string& file, std::string& looked, std::string& error) {
  looked.clear();
  error.clear();
  for (const std::string& d : anvil_library_dirs()) {
    const fs::path p = fs::path(d) / file;
    looked += (looked.empty() ? "" : ", ") + p.string();
    std::error_code ec;
    if (!fs::exists(p, ec)) continue;
    if (void* h = ::dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    if (const char* e = ::dlerror()) error = e;
  }
  looked += ", the dynamic loader's search path";
  void* h = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h && error.empty())
    if (const char* e = ::dlerror()) error = e;
  return h;
}

}  // namespace anvil
