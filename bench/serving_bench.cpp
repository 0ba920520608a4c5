// Serving a CUDA package from several threads (issue 14's serving acceptance):
//   serving_bench PACKAGE [--threads T] [--calls N] [--device cuda:0] [--host 0|1]
// --host 1: each call passes a host input and gets host outputs from Model::run (the copies on
// the runner's stream, one synchronize); 0 (default): a device input, and the output copied to
// the host after the run (Tensor::to).
// One Model with T runners (each its own stream and arena, the weights shared). Prints one JSON
// line with:
//   - throughput of 1 thread and of T threads (each thread N calls, its own input), their ratio;
//   - identical: every output of every call equals the one-thread result for that input, bit
//     for bit;
//   - device memory: what load + warm-up added (cudaMemGetInfo before and after), the weights,
//     T arenas, and the growth from after warm-up to the end of the run (flat: ~0);
//   - load: Model::load's wall time once the CUDA context exists (dlopen + weight upload), and
//     the package's size beside the weights';
//   - swap: while the T threads run, another thread alternates the constants between the
//     original weights and the weights times 2 (update into the inactive set, then swap);
//     every output must be wholly the old or wholly the new model's (mixed_outputs: 0).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "runtime/device_backend.h"
#include "runtime/model.h"

using namespace anvil;  // NOLINT: a bench

namespace {

using Clock = std::chrono::steady_clock;

size_t device_used(const AnvilDeviceApi& api, int dev) {
  size_t f = 0, t = 0;
  if (api.mem_info(dev, &f, &t) != 0) throw Error("mem_info failed", "serving_bench", "", api.last_error());
  return t - f;
}

bool same(const Tensor& a, const Tensor& b) {
  return a.sizes() == b.sizes() && a.to_doubles() == b.to_doubles();
}

Tensor input_for(const runtime::Model& m, int k) {
  const auto& spec = m.manifest().inputs.at(0);
  Shape shape;
  for (const auto& d : spec.sizes) shape.push_back(d.is_constant() ? d.constant() : 1);
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 7 + 13 * k) % 17) / 17.0 - 0.5;
  return Tensor::from_vector(v, shape).to(spec.dtype);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) {
      std::cerr << "usage: serving_bench PACKAGE [--threads T] [--calls N] [--device cuda:0] "
                   "[--host 0|1]\n";
      return 2;
    }
    const std::string pkg = argv[1];
    int threads = 4, calls = 10000;
    bool host = false;
    Device device = Device::cuda(0);
    for (int i = 2; i + 1 < argc; i += 2) {
      const std::string k = argv[i], v = argv[i + 1];
      if (k == "--threads") threads = std::stoi(v);
      else if (k == "--calls") calls = std::stoi(v);
      else if (k == "--device") device = Device::parse(v);
      else if (k == "--host" && (v == "0" || v == "1")) host = v == "1";
      else throw Error("unknown option or value", "serving_bench",
                       "--threads N, --calls N, --device D, --host 0|1", k + " " + v);
    }
    const AnvilDeviceApi& api = runtime::device_backend(device.type);
    api.set_device(device.index);
    const size_t before = device_used(api, device.index);  // the context, before the model
    runtime::ModelOptions mo;
    mo.device = device;
    mo.num_runners = threads;
    // the context exists (mem_info above): the load time is dlopen + weight upload
    const auto t_load = Clock::now();
    runtime::Model m = runtime::Model::load(pkg, mo);
    const double load_ms = std::chrono::duration<double, std::milli>(Clock::now() - t_load).count();
    const double package_mb = static_cast<double>(std::filesystem::file_size(pkg)) / 1048576.0;
    std::vector<Tensor> inputs, want, want2;
    for (int t = 0; t < threads; ++t)
      inputs.push_back(host ? input_for(m, t) : input_for(m, t).to(device));
    for (int t = 0; t < threads; ++t)  // the reference: one thread
      want.push_back(m.run({inputs[static_cast<size_t>(t)]})[0].to(Device::cpu()));
    {  // warm-up from T threads at once, so that every runner has run (its cuBLASLt workspace,
       // its graph captured) before the memory is measured
      std::vector<std::thread> warm;
      for (int t = 0; t < threads; ++t)
        warm.emplace_back([&, t] {
          for (int r = 0; r < 20; ++r) m.run({inputs[static_cast<size_t>(t)]});
        });
      for (auto& th : warm) th.join();
    }
    const size_t after_load = device_used(api, device.index);
    size_t weights = 0;
    for (const auto& c : m.constant_specs()) weights += static_cast<size_t>(shape_numel(c.sizes)) * dtype_size(c.dtype);

    auto run_threads = [&](int n, int per_thread, std::atomic<int>* mismatches,
                           const std::vector<Tensor>* alt, std::atomic<int>* mixed) {
      std::vector<std::thread> pool;
      const auto t0 = Clock::now();
      for (int t = 0; t < n; ++t)
        pool.emplace_back([&, t] {
          const auto& x = inputs[static_cast<size_t>(t)];
          for (int c = 0; c < per_thread; ++c) {
            const Tensor y = m.run({x})[0].to(Device::cpu());
            const bool a = same(y, want[static_cast<size_t>(t)]);
            if (alt) {
              if (!a && !same(y, (*alt)[static_cast<size_t>(t)])) ++*mixed;
            } else if (!a) {
              ++*mismatches;
            }
          }
        });
      for (auto& th : pool) th.join();
      return std::chrono::duration<double>(Clock::now() - t0).count();
    };
    std::atomic<int> mism1{0}, mismT{0};
    const double s1 = run_threads(1, calls, &mism1, nullptr, nullptr);
    const double sT = run_threads(threads, calls, &mismT, nullptr, nullptr);
    const size_t after_run = device_used(api, device.index);
    const double tput1 = calls / s1, tputT = static_cast<double>(calls) * threads / sT;

    // Constant swaps under load: the outputs of the doubled weights first (one thread).
    std::map<std::string, Tensor> original, doubled;
    for (const auto& c : m.constant_specs()) {
      original[c.name] = m.constant(c.name);
      doubled[c.name] = Tensor::from_vector(m.constant(c.name).to_doubles(), c.sizes)
                            .to(c.dtype);
      const std::vector<double> d = doubled[c.name].to_doubles();
      std::vector<double> x2(d.size());
      for (size_t i = 0; i < d.size(); ++i) x2[i] = 2 * d[i];
      doubled[c.name] = Tensor::from_vector(x2, c.sizes).to(c.dtype);
    }
    m.update_constants(doubled, /*inactive=*/false);
    for (int t = 0; t < threads; ++t)
      want2.push_back(m.run({inputs[static_cast<size_t>(t)]})[0].to(Device::cpu()));
    m.update_constants(original, /*inactive=*/false);
    std::atomic<bool> stop{false};
    std::atomic<int> swaps{0}, mixed{0};
    std::thread swapper([&] {
      bool twice = true;
      while (!stop.load()) {
        m.update_constants(twice ? doubled : original, /*inactive=*/true);
        m.swap_constants();
        twice = !twice;
        ++swaps;
      }
    });
    run_threads(threads, std::max(calls / 10, 100), nullptr, &want2, &mixed);
    stop = true;
    swapper.join();

    size_t arena = 0;
    try {
      arena = static_cast<size_t>(std::stoll(m.manifest().planned_peak_bytes));
    } catch (...) {
    }
    std::printf(
        "{\"package\": \"%s\", \"threads\": %d, \"calls_per_thread\": %d, \"tput_1\": %.1f, "
        "\"tput_T\": %.1f, \"speedup\": %.2f, \"identical\": %s, \"mismatches\": %d, "
        "\"added_mb\": %.1f, \"weights_mb\": %.1f, \"arena_mb\": %.2f, "
        "\"bound_mb\": %.1f, \"growth_mb\": %.2f, \"swaps\": %d, \"mixed_outputs\": %d, "
        "\"cuda_graphs\": %s, \"load_ms\": %.1f, \"package_mb\": %.2f, \"host_io\": %s}\n",
        pkg.c_str(), threads, calls, tput1, tputT, tputT / tput1,
        mism1 + mismT == 0 ? "true" : "false", mism1 + mismT.load(),
        (static_cast<double>(after_load) - static_cast<double>(before)) / 1048576.0,
        static_cast<double>(weights) / 1048576.0, static_cast<double>(arena) / 1048576.0,
        (static_cast<double>(weights) + threads * static_cast<double>(arena)) / 1048576.0 + 64,
        (static_cast<double>(after_run) - static_cast<double>(after_load)) / 1048576.0,
        swaps.load(), mixed.load(), m.uses_cuda_graphs() ? "true" : "false", load_ms, package_mb,
        host ? "true" : "false");
    return (mism1 + mismT == 0 && mixed == 0) ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "serving_bench: error: " << e.what() << "\n";
    return 1;
  }
}
