// soak_bench: long runs without leaks (issue 20, item 3). Samples resident memory, open file
// descriptors and latency percentiles over time and prints a table, one row per window:
//   soak_bench model PACKAGE [--threads 8] [--runs 1000000] [--samples 20] [--pool 1]
//       one Model with T runners served by T threads (each its own input), RUNS calls in all;
//       every output is compared bit for bit with that thread's first one
//   soak_bench dist BACKEND [--ops 100000] [--samples 20]      (one rank; under a launcher)
//   soak_bench launch N soak_bench dist gloo ...               (dist::launch, like anvil launch)
//       OPS collectives (all_reduce, all_gather, broadcast in turn, 256 B to 64 KiB), every
//       value checked; rank 0 prints the table, every rank a summary line
// A window's latencies are those of the calls that started in it (p50, p99, max in us). The
// summary compares the last window with the second (the first holds the warm-up): memory
// growth, fd growth, and the spread of p99 over windows 2..S. Exit status 1 on a wrong result.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/npy.h"
#include "dist/launcher.h"
#include "dist/process_group.h"
#include "dist/world.h"
#include "runtime/model.h"

using namespace anvil;  // NOLINT: a bench
using Clock = std::chrono::steady_clock;

namespace {

/// Resident memory of this process in MiB (/proc/self/statm).
double rss_mib() {
  std::ifstream f("/proc/self/statm");
  long long size = 0, resident = 0;
  f >> size >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / 1048576.0;
}

/// Open file descriptors of this process (/proc/self/fd, less the one listing it).
int open_fds() {
  int n = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) ++n;
  return n - 1;
}

/// One row of the table.
struct Sample {
  int64_t done = 0;
  double seconds = 0, rss = 0;
  int fds = 0;
  double p50 = 0, p99 = 0, max = 0;
};

/// Counts calls and latencies, and samples memory and fds each time `window` more calls end.
class Soak {
 public:
  Soak(int64_t total, int samples) : total_(total), window_(std::max<int64_t>(1, total / samples)) {
    lat_.assign(static_cast<size_t>(total), 0.0f);  // touched now: not growth later
    samples_.reserve(static_cast<size_t>(samples) + 1);
  }
  /// Claims the next call's slot; -1 when every call was claimed.
  int64_t claim() {
    const int64_t i = next_.fetch_add(1);
    return i < total_ ? i : -1;
  }
  void finish(int64_t slot, Clock::time_point start) {
    lat_[static_cast<size_t>(slot)] =
        std::chrono::duration<float, std::micro>(Clock::now() - start).count();
    done_.fetch_add(1);
  }
  /// Samples until every call ended (run on a thread of its own).
  void sample_loop() {
    const auto t0 = Clock::now();
    for (int64_t k = 1; k * window_ <= total_;) {
      const int64_t d = done_.load();
      if (d >= k * window_) {
        Sample s;
        s.done = d;
        s.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
        s.rss = rss_mib();
        s.fds = open_fds();
        samples_.push_back(s);
        ++k;
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
  }
  /// Fills the latency columns and prints the table and the summary.
  void report(const std::string& title) {
    for (size_t k = 0; k < samples_.size(); ++k) {
      const auto b = lat_.begin() + static_cast<int64_t>(k) * window_;
      std::vector<float> w(b, b + window_);
      std::sort(w.begin(), w.end());
      auto at = [&](double q) {
        return w[static_cast<size_t>(q * static_cast<double>(w.size() - 1))];
      };
      samples_[k].p50 = at(0.50);
      samples_[k].p99 = at(0.99);
      samples_[k].max = w.back();
    }
    std::printf("%s\n%8s %10s %8s %9s %5s %9s %9s %10s\n", title.c_str(), "window", "done",
                "time_s", "rss_MiB", "fds", "p50_us", "p99_us", "max_us");
    for (size_t k = 0; k < samples_.size(); ++k) {
      const Sample& s = samples_[k];
      std::printf("%8zu %10lld %8.1f %9.2f %5d %9.1f %9.1f %10.1f\n", k + 1,
                  static_cast<long long>(s.done), s.seconds, s.rss, s.fds, s.p50, s.p99, s.max);
    }
    if (samples_.size() < 3) return;
    const Sample &second = samples_[1], &last = samples_.back();
    double lo = 1e30, hi = 0;
    std::vector<double> p99s;
    for (size_t k = 1; k < samples_.size(); ++k) {
      lo = std::min(lo, samples_[k].p99);
      hi = std::max(hi, samples_[k].p99);
      p99s.push_back(samples_[k].p99);
    }
    std::sort(p99s.begin(), p99s.end());
    std::printf(
        "summary: rss %.2f -> %.2f MiB (growth %+.2f MiB after window 2), fds %d -> %d "
        "(%+d), p99 over windows 2..%zu: min %.1f median %.1f max %.1f us "
        "(max/median %.2f), %.0f calls/s\n",
        second.rss, last.rss, last.rss - second.rss, samples_[0].fds, last.fds,
        last.fds - samples_[0].fds, samples_.size(), lo, p99s[p99s.size() / 2], hi,
        hi / p99s[p99s.size() / 2], static_cast<double>(last.done) / last.seconds);
  }

 private:
  int64_t total_, window_;
  std::atomic<int64_t> next_{0}, done_{0};
  std::vector<float> lat_;
  std::vector<Sample> samples_;
};

/// The value of `--name` in argv[first..] (or `def`).
int64_t option(int argc, char** argv, int first, const std::string& name, int64_t def) {
  for (int i = first; i + 1 < argc; i += 2) {
    if (argv[i] == "--" + name) return std::stoll(argv[i + 1]);
    if (std::strncmp(argv[i], "--", 2) != 0)
      throw Error("unexpected argument", "soak_bench", "--OPTION VALUE", argv[i]);
  }
  return def;
}

int model_mode(const std::string& pkg, int argc, char** argv) {
  const int threads = static_cast<int>(option(argc, argv, 3, "threads", 8));
  const int64_t runs = option(argc, argv, 3, "runs", 1000000);
  const int samples = static_cast<int>(option(argc, argv, 3, "samples", 20));
  runtime::ModelOptions mo;
  mo.num_runners = threads;
  mo.num_threads = static_cast<int>(option(argc, argv, 3, "pool", 1));
  runtime::Model m = runtime::Model::load(pkg, mo);
  // Each thread's input: the package's first input shape (a symbolic dim taken as 8), values
  // that differ per thread.
  const auto& spec = m.manifest().inputs.at(0);
  Shape shape;
  for (const auto& d : spec.sizes) shape.push_back(d.is_constant() ? d.constant() : 8);
  std::vector<Tensor> inputs, want;
  for (int t = 0; t < threads; ++t) {
    std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = static_cast<double>((i * 7 + 13 * t) % 17) / 17.0 - 0.5;
    inputs.push_back(Tensor::from_vector(v, shape).to(spec.dtype));
    want.push_back(m.run({inputs.back()})[0]);
  }
  Soak soak(runs, samples);
  std::atomic<int64_t> wrong{0};
  std::thread sampler([&] { soak.sample_loop(); });
  std::vector<std::thread> th;
  for (int t = 0; t < threads; ++t)
    th.emplace_back([&, t] {
      const Tensor& ref = want[static_cast<size_t>(t)];
      for (int64_t slot; (slot = soak.claim()) >= 0;) {
        const auto start = Clock::now();
        const std::vector<Tensor> out = m.run({inputs[static_cast<size_t>(t)]});
        soak.finish(slot, start);
        if (out[0].nbytes() != ref.nbytes() ||
            std::memcmp(out[0].data_ptr(), ref.data_ptr(), ref.nbytes()) != 0)
          wrong.fetch_add(1);
      }
    });
  for (auto& x : th) x.join();
  sampler.join();
  soak.report("soak model " + pkg + ": " + std::to_string(threads) + " threads, " +
              std::to_string(runs) + " runs");
  std::printf("wrong outputs: %lld\n", static_cast<long long>(wrong.load()));
  return wrong.load() == 0 ? 0 : 1;
}

int dist_mode(const std::string& backend, int argc, char** argv) {
  const int64_t ops = option(argc, argv, 3, "ops", 100000);
  const int samples = static_cast<int>(option(argc, argv, 3, "samples", 20));
  auto pg = dist::init_world_from_env(backend);
  const int W = pg->size(), R = pg->rank();
  Soak soak(ops, samples);
  std::thread sampler([&] { soak.sample_loop(); });
  int64_t wrong = 0;
  for (int64_t slot; (slot = soak.claim()) >= 0;) {
    const int64_t n = int64_t{64} << (slot % 9);  // 256 B .. 64 KiB of float32
    const float base = static_cast<float>(slot % 1000);
    const auto start = Clock::now();
    bool ok = true;
    switch (slot % 3) {
      case 0: {  // all_reduce: sum over ranks of (rank + 1) + base
        Tensor x = Tensor::full({n}, (R + 1) + base, DType::kFloat32);
        pg->all_reduce(x, dist::ReduceOp::kSum)->wait();
        const float want = static_cast<float>(W * (W + 1) / 2) + W * base;
        ok = x.data<float>()[0] == want && x.data<float>()[n - 1] == want;
        break;
      }
      case 1: {  // all_gather: block r holds r + base
        Tensor x = Tensor::full({n}, R + base, DType::kFloat32);
        Tensor out = Tensor::empty({W * n}, DType::kFloat32);
        pg->all_gather_into_tensor(out, x)->wait();
        for (int r = 0; r < W; ++r)
          ok = ok && out.data<float>()[r * n] == r + base &&
               out.data<float>()[r * n + n - 1] == r + base;
        break;
      }
      default: {  // broadcast from rank slot % W
        const int src = static_cast<int>(slot % W);
        Tensor x = Tensor::full({n}, R == src ? base + 0.5f : -1.0f, DType::kFloat32);
        pg->broadcast(x, src)->wait();
        ok = x.data<float>()[0] == base + 0.5f && x.data<float>()[n - 1] == base + 0.5f;
      }
    }
    soak.finish(slot, start);
    if (!ok) ++wrong;
  }
  sampler.join();
  pg->barrier()->wait();
  if (R == 0)
    soak.report("soak dist " + backend + ": " + std::to_string(W) + " ranks, " +
                std::to_string(ops) + " collectives (rank 0)");
  std::printf("rank %d: rss %.2f MiB, fds %d, wrong results %lld\n", R, rss_mib(), open_fds(),
              static_cast<long long>(wrong));
  return wrong == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "launch" && argc > 3) {
      dist::LaunchOptions o;
      o.nproc_per_node = std::stoi(argv[2]);
      o.command.assign(argv + 3, argv + argc);
      return dist::launch(o);
    }
    if (mode == "model" && argc > 2) return model_mode(argv[2], argc, argv);
    if (mode == "dist" && argc > 2) return dist_mode(argv[2], argc, argv);
    std::fprintf(stderr,
                 "usage: soak_bench model PACKAGE [--threads 8] [--runs 1000000] [--samples 20] "
                 "[--pool 1]\n       soak_bench dist BACKEND [--ops 100000] [--samples 20]\n"
                 "       soak_bench launch N soak_bench dist BACKEND ...\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak_bench: %s\n", e.what());
    return 1;
  }
}
