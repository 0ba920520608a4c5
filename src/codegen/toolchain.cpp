#include "codegen/toolchain.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "codegen/cache.h"

extern char** environ;

namespace anvil::codegen {

namespace fs = std::filesystem;

namespace {

std::atomic<int64_t> g_compiles{0};
std::atomic<int64_t> g_links{0};

// ------------------------------------------------------------------------------------ SHA-256

constexpr std::array<uint32_t, 64> kSha256K = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void sha256_block(uint32_t h[8], const unsigned char* p) {
  uint32_t w[64];
  for (int i = 0; i < 16; ++i)
    w[i] = (uint32_t(p[4 * i]) << 24) | (uint32_t(p[4 * i + 1]) << 16) |
           (uint32_t(p[4 * i + 2]) << 8) | uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 64; ++i) {
    const uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
    const uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
    w[i] = w[i - 16] + s0 + w[i - 7] + s1;
  }
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
  for (int i = 0; i < 64; ++i) {
    const uint32_t t1 =
        k + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + kSha256K[i] + w[i];
    const uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
    k = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  h[0] += a;
  h[1] += b;
  h[2] += c;
  h[3] += d;
  h[4] += e;
  h[5] += f;
  h[6] += g;
  h[7] += k;
}

// --------------------------------------------------------------------------------- processes

/// Exit status (128 + signal when killed) and combined stdout + stderr of a finished process.
struct ProcessResult {
  int status = 0;
  std::string output;
};

/// Runs argv (PATH lookup for argv[0]) with stdin from /dev/null, capturing stdout and stderr.
ProcessResult run_process(const std::vector<std::string>& argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw Error("cannot create a pipe", "toolchain", "", std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw Error(str("cannot start the C++ compiler '", argv[0], "'"), "toolchain",
                "a compiler on PATH (set ANVIL_CXX to choose one)", std::strerror(rc));
  }
  ProcessResult result;
  char buf[16384];
  while (true) {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      result.output.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// A temporary name beside `path`, unique in this process: threads that build the same source
/// at once (the autotuner compiles many candidates in parallel; two problems may share a
/// template's text) each write their own file and the last rename wins.
fs::path unique_tmp(const fs::path& path) {
  static std::atomic<uint64_t> counter{0};
  return path.string() + str(".tmp.", ::getpid(), ".", counter++);
}

/// Writes `data` to `path` atomically (a temporary file in the same folder, then rename).
void write_atomic(const fs::path& path, const std::string& data) {
  fs::create_directories(path.parent_path());
  const fs::path tmp = unique_tmp(path);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    if (!out)
      throw Error("cannot write file", tmp.string(), "a writable folder", std::strerror(errno));
  }
  fs::rename(tmp, path);
}

/// The compiler's real path (PATH lookup, symlinks resolved); the command itself if not found.
std::string resolve_compiler_path(const std::string& compiler) {
  std::error_code ec;
  if (compiler.find('/') != std::string::npos) {
    fs::path p = fs::canonical(compiler, ec);
    return ec ? compiler : p.string();
  }
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    const fs::path cand = fs::path(dir.empty() ? "." : dir) / compiler;
    if (::access(cand.c_str(), X_OK) == 0) {
      fs::path p = fs::canonical(cand, ec);
      if (!ec) return p.string();
    }
  }
  return compiler;
}

/// Output of `compiler ARGS`, cached in memory and on disk (keyed by the compiler binary's
/// path, size and mtime) so that a second build in a new process runs no probe.
std::string probe(const std::string& compiler, const std::vector<std::string>& args,
                  const std::string& cache_dir) {
  static std::mutex mutex;
  static std::map<std::string, std::string> memo;
  const std::string real = resolve_compiler_path(compiler);
  struct stat st {};
  const bool have_stat = ::stat(real.c_str(), &st) == 0;
  std::string key =
      real + "\n" + str(have_stat ? st.st_size : -1, " ", have_stat ? st.st_mtime : 0);
  for (const std::string& a : args) key += "\n" + a;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = memo.find(key);
    if (it != memo.end()) return it->second;
  }
  const fs::path file = fs::path(cache_dir) / "probe" / (sha256_hex(key) + ".txt");
  std::string out;
  std::error_code ec;
  if (have_stat && fs::exists(file, ec)) {
    out = read_text(file);
  } else {
    std::vector<std::string> argv{compiler};
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessResult r = run_process(argv);
    if (r.status != 0)
      throw Error(str("the C++ compiler '", compiler, "' failed to run"), "toolchain",
                  "a working compiler", r.output.substr(0, 2000));
    out = real + "\n" + r.output;
    if (have_stat) {
      try {
        write_atomic(file, out);
      } catch (const std::exception&) {
        // An unwritable cache only costs a probe next time.
      }
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  memo[key] = out;
  return out;
}

/// -march=native macro -> the feature name the runtime checks at load (runtime/cpu_features).
constexpr std::pair<const char*, const char*> kNativeFeatureMacros[] = {
    {"__SSE4_2__", "sse4.2"},
    {"__AVX__", "avx"},
    {"__AVX2__", "avx2"},
    {"__FMA__", "fma"},
    {"__F16C__", "f16c"},
    {"__BMI2__", "bmi2"},
    {"__AVX512F__", "avx512f"},
    {"__AVX512BW__", "avx512bw"},
    {"__AVX512VL__", "avx512vl"},
    {"__AVX512DQ__", "avx512dq"},
    {"__AVX512CD__", "avx512cd"},
    {"__AVX512VNNI__", "avx512vnni"},
    {"__AVX512BF16__", "avx512bf16"},
    {"__AVX512FP16__", "avx512fp16"},
    {"__AVX512VBMI__", "avx512vbmi"},
    {"__AVX512VBMI2__", "avx512vbmi2"},
    {"__AVX512IFMA__", "avx512ifma"},
    {"__AVX512BITALG__", "avx512bitalg"},
    {"__AVX512VPOPCNTDQ__", "avx512vpopcntdq"},
    {"__AVXVNNI__", "avxvnni"},
    {"__AMX_TILE__", "amx-tile"},
    {"__AMX_BF16__", "amx-bf16"},
    {"__AMX_INT8__", "amx-int8"},
    {"__GFNI__", "gfni"},
    {"__VAES__", "vaes"},
    {"__VPCLMULQDQ__", "vpclmulqdq"},
};

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) out += (out.empty() ? "" : " ") + a;
  return out;
}

/// Draws build progress on stderr.
class Progress {
 public:
  Progress(ProgressMode mode, int total) : total_(total) {
    if (mode == ProgressMode::kAuto) mode = ::isatty(2) ? ProgressMode::kBar : ProgressMode::kLines;
    mode_ = total > 0 ? mode : ProgressMode::kQuiet;
  }
  /// One unit finished (`how` is "compiled" or "cached").
  void step(const std::string& name, const char* how) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++done_;
    if (mode_ == ProgressMode::kLines) {
      std::fprintf(stderr, "anvil: [%d/%d] %s %s\n", done_, total_, how, name.c_str());
    } else if (mode_ == ProgressMode::kBar) {
      constexpr int kWidth = 30;
      const int fill = total_ ? done_ * kWidth / total_ : kWidth;
      std::string bar(static_cast<size_t>(fill), '#');
      bar.resize(kWidth, '.');
      std::fprintf(stderr, "\r\033[Kanvil: compiling [%s] %d/%d %s", bar.c_str(), done_, total_,
                   name.c_str());
      if (done_ == total_) std::fputc('\n', stderr);
    }
    std::fflush(stderr);
  }
  /// Ends an unfinished bar line (on failure).
  void abort() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (mode_ == ProgressMode::kBar && done_ != total_) std::fputc('\n', stderr);
  }

 private:
  std::mutex mutex_;
  ProgressMode mode_;
  int total_;
  int done_ = 0;
};

}  // namespace

std::string sha256_hex(const std::string& data) {
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const size_t n = data.size();
  size_t i = 0;
  for (; i + 64 <= n; i += 64) sha256_block(h, p + i);
  unsigned char tail[128] = {};
  const size_t rest = n - i;
  std::memcpy(tail, p + i, rest);
  tail[rest] = 0x80;
  const size_t tail_len = rest + 9 <= 64 ? 64 : 128;
  const uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (int b = 0; b < 8; ++b) tail[tail_len - 1 - b] = static_cast<unsigned char>(bits >> (8 * b));
  sha256_block(h, tail);
  if (tail_len == 128) sha256_block(h, tail + 64);
  char out[65];
  for (int k = 0; k < 8; ++k) std::snprintf(out + 8 * k, 9, "%08x", h[k]);
  return std::string(out, 64);
}

std::string default_cache_dir() {
  if (const char* d = std::getenv("ANVIL_CACHE_DIR"); d && *d) return d;
  if (const char* d = std::getenv("XDG_CACHE_HOME"); d && *d)
    return (fs::path(d) / "anvil").string();
  if (const char* d = std::getenv("HOME"); d && *d)
    return (fs::path(d) / ".cache" / "anvil").string();
  return (fs::temp_directory_path() / "anvil-cache").string();
}

std::string default_compiler() {
  if (const char* c = std::getenv("ANVIL_CXX"); c && *c) return c;
  return "c++";
}

std::string default_include_dir() {
  auto has_header = [](const fs::path& dir) {
    std::error_code ec;
    return fs::exists(dir / "anvil" / "anvil_rt.h", ec);
  };
  if (const char* d = std::getenv("ANVIL_INCLUDE_DIR"); d && *d) return d;
  // An installed CLI (bin/anvil beside include/) uses the headers installed with it, even where
  // the source tree it was built from still exists.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && has_header(exe.parent_path().parent_path() / "include"))
    return (exe.parent_path().parent_path() / "include").string();
#ifdef ANVIL_RT_INCLUDE_DIR
  if (has_header(ANVIL_RT_INCLUDE_DIR)) return ANVIL_RT_INCLUDE_DIR;
#endif
  if (!ec && has_header(exe.parent_path().parent_path().parent_path() / "include"))
    return (exe.parent_path().parent_path().parent_path() / "include").string();
  throw Error("cannot find anvil/anvil_rt.h for generated code", "toolchain",
              "ANVIL_INCLUDE_DIR naming the folder that holds anvil/anvil_rt.h",
              "no such folder next to the executable");
}

int64_t compile_invocations() { return g_compiles.load(); }
int64_t link_invocations() { return g_links.load(); }

TargetInfo resolve_target(const std::string& name, const std::string& compiler_in,
                          const std::string& cache_dir) {
  TargetInfo t;
  t.name = name;
  if (name == "x86_64" || name == "generic") {
    t.manifest_target = "cpu-x86_64";
    t.flags = {"-march=x86-64"};
  } else if (name == "x86_64-avx2") {
    t.manifest_target = "cpu-x86_64-avx2";
    t.flags = {"-march=x86-64", "-mavx2", "-mfma"};
    t.cpu_features = {"avx2", "fma"};
  } else if (name == "x86_64-avx512") {
    t.manifest_target = "cpu-x86_64-avx512";
    t.flags = {"-march=x86-64", "-mavx2", "-mfma", "-mavx512f", "-mavx512bw", "-mavx512vl"};
    t.cpu_features = {"avx2", "fma", "avx512f", "avx512bw", "avx512vl"};
  } else if (name == "native" || name.empty()) {
    t.name = "native";
    t.manifest_target = "cpu-x86_64-native";
    t.flags = {"-march=native"};
    const std::string compiler = compiler_in.empty() ? default_compiler() : compiler_in;
    const std::string macros =
        probe(compiler, {"-march=native", "-dM", "-E", "-x", "c++", "/dev/null"},
              cache_dir.empty() ? default_cache_dir() : cache_dir);
    for (const auto& [macro, feature] : kNativeFeatureMacros)
      if (macros.find(str("#define ", macro, " ")) != std::string::npos)
        t.cpu_features.push_back(feature);
  } else {
    throw Error("unknown compile target", "toolchain",
                "native, x86_64-avx2, x86_64-avx512 or x86_64", name);
  }
  return t;
}

BuildResult build_shared_library(const std::vector<SourceFile>& sources,
                                 const std::string& output_so, const ToolchainOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  ANVIL_CHECK(!sources.empty(), "toolchain", "nothing to compile", "at least one source", "none");
  const std::string compiler = opt.compiler.empty() ? default_compiler() : opt.compiler;
  const std::string cache_dir = opt.cache_dir.empty() ? default_cache_dir() : opt.cache_dir;
  const std::string include_dir = opt.include_dir.empty() ? default_include_dir() : opt.include_dir;
  std::string header = read_text(fs::path(include_dir) / "anvil" / "anvil_rt.h");
  ANVIL_CHECK(!header.empty(), "toolchain", "anvil/anvil_rt.h is missing or empty",
              "a header under " + include_dir, "none");
  // the float8 conversions every preamble includes are part of what an object depends on
  header += read_text(fs::path(include_dir) / "anvil" / "anvil_fp8.h");

  BuildResult result;
  std::vector<std::string> flags;
  if (opt.compile_flags.empty()) {
    result.target = resolve_target(opt.target, compiler, cache_dir);
    flags = {opt.opt_level, "-fPIC", "-std=c++17"};
    flags.insert(flags.end(), result.target.flags.begin(), result.target.flags.end());
  } else {  // a device target's own compile line
    result.target.name = result.target.manifest_target = opt.target;
    flags = opt.compile_flags;
  }
  flags.insert(flags.end(), opt.extra_flags.begin(), opt.extra_flags.end());

  // Each unit's compile flags: its own (SourceFile::flags) or the build's, then extra_flags.
  auto unit_flags = [&](const SourceFile& s) {
    if (s.flags.empty()) return flags;
    std::vector<std::string> f = s.flags;
    f.insert(f.end(), opt.extra_flags.begin(), opt.extra_flags.end());
    return f;
  };
  // Key material of a unit: compiler identity, flags, what `native` means, header, source.
  const std::string compiler_id = probe(compiler, {"--version"}, cache_dir);
  std::string features;
  for (const std::string& f : result.target.cpu_features) features += f + ",";

  std::vector<std::string> keys;
  std::map<std::string, int> names;
  for (const SourceFile& s : sources) {
    ANVIL_CHECK(
        !s.name.empty() && s.name.find('/') == std::string::npos && s.name != "." && s.name != "..",
        "toolchain", "bad source file name", "a plain file name", s.name);
    ANVIL_CHECK(names[s.name]++ == 0, "toolchain", "duplicate source file name", "unique names",
                s.name);
    const std::string common = compiler_id + "\nflags:" + shell_join(unit_flags(s)) +
                               "\nfeatures:" + features + "\nheader:" + sha256_hex(header);
    keys.push_back(sha256_hex(common + "\nsource:" +
                              (s.cache_name.empty() ? s.name : s.cache_name) + "\n" + s.code));
  }
  const fs::path obj_dir = fs::path(cache_dir) / "obj";
  auto obj_path = [&](size_t i) { return obj_dir / keys[i].substr(0, 2) / (keys[i] + ".o"); };

  // The build folder holds sources handed to the compiler (kept when it fails).
  fs::path build_dir = opt.build_dir;
  const bool own_build_dir = build_dir.empty();
  auto ensure_build_dir = [&] {
    static std::mutex mutex;
    std::lock_guard<std::mutex> lock(mutex);
    if (!build_dir.empty()) return;
    fs::create_directories(fs::path(cache_dir) / "build");
    std::string templ = (fs::path(cache_dir) / "build" / "b-XXXXXX").string();
    if (!::mkdtemp(templ.data()))
      throw Error("cannot create a build folder", templ, "a writable cache dir",
                  std::strerror(errno));
    build_dir = templ;
  };
  if (!own_build_dir) fs::create_directories(build_dir);

  Progress progress(opt.progress, static_cast<int>(sources.size()));
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex error_mutex;
  std::exception_ptr error;
  std::atomic<int> compiled{0}, cached{0};
  auto worker = [&] {
    while (!failed) {
      const size_t i = next.fetch_add(1);
      if (i >= sources.size()) return;
      try {
        const fs::path obj = obj_path(i);
        std::error_code ec;
        if (opt.use_cache && codegen::touch_cache_entry(obj.string())) {  // a hit, marked used
          ++cached;
          progress.step(sources[i].name, "cached");
          continue;
        }
        ensure_build_dir();
        const fs::path src = build_dir / sources[i].name;
        write_atomic(src, sources[i].code);
        fs::create_directories(obj.parent_path());
        const fs::path tmp_obj = unique_tmp(obj);
        std::vector<std::string> argv{compiler};
        const std::vector<std::string> f = unit_flags(sources[i]);
        argv.insert(argv.end(), f.begin(), f.end());
        argv.insert(argv.end(), {"-I" + include_dir, "-c", src.string(), "-o", tmp_obj.string()});
        ++g_compiles;
        ProcessResult r = run_process(argv);
        if (r.status != 0) {
          fs::remove(tmp_obj, ec);
          std::string msg = r.output;
          if (msg.size() > 16000) msg = msg.substr(0, 16000) + "\n... (truncated)";
          throw Error(
              str("C++ compiler failed on ", sources[i].name, " (exit status ", r.status,
                  "); source kept at ", src.string(), "\ncommand: ", shell_join(argv), "\n", msg),
              "toolchain");
        }
        fs::rename(tmp_obj, obj);
        ++compiled;
        progress.step(sources[i].name, "compiled");
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  int jobs = opt.jobs > 0 ? opt.jobs : static_cast<int>(std::thread::hardware_concurrency());
  jobs = std::max(1, std::min<int>(jobs, static_cast<int>(sources.size())));
  std::vector<std::thread> threads;
  for (int j = 1; j < jobs; ++j) threads.emplace_back(worker);
  worker();
  for (std::thread& t : threads) t.join();
  if (error) {
    progress.abort();
    std::rethrow_exception(error);
  }
  result.compiled = compiled;
  result.cached = cached;

  // Link (or reuse a library linked from exactly these objects).
  const std::vector<std::string> link_flags =
      opt.link_flags.empty()
          ? std::vector<std::string>{"-shared", "-fPIC", "-Wl,-z,defs", "-Wl,-O1"}
          : opt.link_flags;
  std::string link_key = compiler_id + "\nlink:" + shell_join(link_flags);
  for (const std::string& k : keys) link_key += "\n" + k;
  const fs::path so_cache = fs::path(cache_dir) / "so" / (sha256_hex(link_key) + ".so");
  std::error_code ec;
  if (!(opt.use_cache && codegen::touch_cache_entry(so_cache.string()))) {
    fs::create_directories(so_cache.parent_path());
    const fs::path tmp_so = unique_tmp(so_cache);
    std::vector<std::string> argv{compiler};
    argv.insert(argv.end(), link_flags.begin(), link_flags.end());
    argv.insert(argv.end(), {"-o", tmp_so.string()});
    for (size_t i = 0; i < sources.size(); ++i) argv.push_back(obj_path(i).string());
    ++g_links;
    ProcessResult r = run_process(argv);
    if (r.status != 0) {
      fs::remove(tmp_so, ec);
      throw Error(str("linking model.so failed (exit status ", r.status,
                      ")\ncommand: ", shell_join(argv), "\n", r.output.substr(0, 16000)),
                  "toolchain");
    }
    fs::rename(tmp_so, so_cache);
    result.linked = true;
  }
  const fs::path out = fs::absolute(output_so);
  if (out.has_parent_path()) fs::create_directories(out.parent_path());
  const fs::path tmp_out = unique_tmp(out);
  fs::copy_file(so_cache, tmp_out, fs::copy_options::overwrite_existing);
  fs::rename(tmp_out, out);
  result.so_path = out.string();
  // New cache entries: keep the folder under $ANVIL_CACHE_MAX_MB (codegen/cache.h).
  if (result.compiled > 0 || result.linked)
    prune_after_insert(cache_dir, so_cache.string());

  if (own_build_dir && !build_dir.empty()) fs::remove_all(build_dir, ec);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return result;
}

}  // namespace anvil::codegen
