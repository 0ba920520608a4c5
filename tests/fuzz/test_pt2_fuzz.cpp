// Fuzz-style robustness test of the .pt2 reader: for every fixture archive, a few hundred mutated
// copies (truncated, bytes flipped, JSON fields removed / renamed / retyped, entries deleted,
// weight files resized), made with a fixed seed. Each must load or raise anvil::Error; any other
// exception fails the test and a crash fails the binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"

namespace anvil {
namespace {

using nlohmann::json;

/// One place in a JSON tree: a member of an object or an element of an array.
struct Slot {
  json* parent;
  std::string key;  // objects
  size_t index;     // arrays
  json& value() const { return parent->is_object() ? (*parent)[key] : (*parent)[index]; }
};

/// Every slot of `j`, skipping the insides of free-form sections the reader does not interpret
/// much (stack traces, module call graph), so mutations land where parsing happens.
void collect(json& j, std::vector<Slot>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back({&j, it.key(), 0});
      if (it.key() != "metadata" && it.key() != "module_call_graph") collect(it.value(), out);
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back({&j, "", i});
      collect(j[i], out);
    }
  }
}

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  size_t below(size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng_) : 0; }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  /// A value of some other shape, the kinds of surprises a broken writer produces.
  json random_value(const json& doc_sample) {
    switch (below(22)) {
      case 0:
        return nullptr;
      case 1:
        return 0;
      case 2:
        return -1;
      case 3:
        return 7;
      case 4:
        return 29;  // a float8 dtype code
      case 5:
        return int64_t{1} << 62;
      case 6:
        return std::numeric_limits<int64_t>::min();
      case 7:
        return std::numeric_limits<uint64_t>::max();
      case 8:
        return 1.5;
      case 9:
        return 1e300;
      case 10:
        return "";
      case 11:
        return "x";
      case 12:
        return "Infinity";
      case 13:
        return true;
      case 14:
        return json::array();
      case 15:
        return json::object();
      case 16:
        return json{{"as_int", 3}};
      case 17:
        return json{{"as_none", true}};
      case 18:
        return json{{"as_tensor", {{"name", "x"}}}};
      case 19:
        return json{{"as_expr", {{"expr_str", "Mul(Integer(3), Symbol('s0'"}}}};
      case 20:
        return json::array({doc_sample});
      default:
        return doc_sample;
    }
  }

  /// Removes, renames, retypes, splices or nudges 1-3 random places of `doc`.
  void mutate_json(json& doc) {
    int ops = 1 + static_cast<int>(below(3));
    for (int k = 0; k < ops; ++k) {
      std::vector<Slot> slots;
      collect(doc, slots);
      if (slots.empty()) return;
      Slot s = slots[below(slots.size())];
      json sample = slots[below(slots.size())].value();  // copied before any change
      switch (below(5)) {
        case 0:  // remove
          if (s.parent->is_object())
            s.parent->erase(s.key);
          else
            s.parent->erase(s.index);
          break;
        case 1:  // rename a member (arrays: duplicate an element)
          if (s.parent->is_object()) {
            json v = std::move((*s.parent)[s.key]);
            s.parent->erase(s.key);
            (*s.parent)[s.key + (chance(0.5) ? "_x" : "")] = std::move(v);
          } else {
            s.parent->insert(s.parent->begin() + static_cast<std::ptrdiff_t>(s.index), sample);
          }
          break;
        case 2:  // retype
          s.value() = random_value(sample);
          break;
        case 3:  // splice another part of the document here
          s.value() = sample;
          break;
        default: {  // nudge a leaf
          json& v = s.value();
          if (v.is_string())
            v = chance(0.5) ? v.get<std::string>() + "_" : std::string();
          else if (v.is_number_integer())  // +1 or negate, wrapping like the hardware does
            v = static_cast<int64_t>(chance(0.5) ? v.get<uint64_t>() + 1 : 0 - v.get<uint64_t>());
          else if (v.is_boolean())
            v = !v.get<bool>();
          else
            v = random_value(sample);
        }
      }
    }
  }

  /// Overwrites 1-8 bytes of `s` (half the time within its last 4 KiB, where zip directories live).
  void flip_bytes(std::string& s) {
    if (s.empty()) return;
    int n = 1 + static_cast<int>(below(8));
    for (int i = 0; i < n; ++i) {
      size_t at = chance(0.5) && s.size() > 4096 ? s.size() - 1 - below(4096) : below(s.size());
      s[at] = static_cast<char>(below(256));
    }
  }

 private:
  std::mt19937_64 rng_;
};

struct Tally {
  int loaded = 0, rejected = 0;
};

/// Loads `bytes` from memory, or (`path` non-empty) after writing them to `path`.
void try_load(const std::string& bytes, bool weights, const std::string& what, Tally& t,
              const std::string& path = "") {
  const std::string name = path.empty() ? "fuzz.pt2" : path;
  try {
    if (path.empty()) {
      frontend::load_pt2_bytes(bytes, name, {weights});
    } else {
      std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
      frontend::load_pt2(path, {weights});
    }
    ++t.loaded;
  } catch (const Error& e) {
    ++t.rejected;
    // Every rejection names the archive it came from.
    EXPECT_EQ(std::string(e.what()).rfind(name, 0), 0u) << what << ": " << e.what();
    if (std::getenv("ANVIL_FUZZ_VERBOSE")) std::printf("%s: %s\n", what.c_str(), e.what());
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": raised a non-anvil exception: " << e.what();
  } catch (...) {
    ADD_FAILURE() << what << ": raised a non-exception";
  }
}

struct FuzzPlan {
  const char* fixture;
  int mutants;
};

void fuzz_fixture(const FuzzPlan& plan, uint64_t seed) {
  const std::string original = test::read_file_bytes(test::fixture_path(plan.fixture));
  const test::Archive base = test::Archive::from_bytes(original, plan.fixture);
  const json model = json::parse(test::Archive(base).at("models/model.json"));
  const json weights_cfg =
      json::parse(test::Archive(base).at("data/weights/model_weights_config.json"));
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("anvil_fuzz_" + std::string(plan.fixture) + ".pt2"))
                               .string();
  Mutator m(seed);
  Tally tally;
  // ANVIL_FUZZ_SCALE=F runs F times as many mutants (at least 8): 4 for longer local fuzzing
  // sessions, 0.25 for the sanitizer build in CI (scripts/test.sh: at -O0 under ASan the full
  // plan takes 3 minutes there, most of them on the transformer fixtures; the optimised build
  // runs the full plan in the main test stage).
  const char* scale_env = std::getenv("ANVIL_FUZZ_SCALE");
  const double scale = scale_env ? std::atof(scale_env) : 1.0;
  const int mutants =
      std::max(8, static_cast<int>(std::lround(plan.mutants * (scale > 0 ? scale : 1.0))));
  for (int i = 0; i < mutants; ++i) {
    const std::string what = std::string(plan.fixture) + " mutant " + std::to_string(i);
    const bool weights = !m.chance(0.1);
    const size_t kind = m.below(100);
    // Damaged archives are read from a file a quarter of the time (libzip's file source).
    const std::string path = m.chance(0.25) ? file : std::string();
    if (kind < 15) {  // truncated archive
      try_load(original.substr(0, m.below(original.size())), weights, what + " (truncated)", tally,
               path);
    } else if (kind < 30) {  // raw bytes overwritten
      std::string bytes = original;
      m.flip_bytes(bytes);
      try_load(bytes, weights, what + " (bytes flipped)", tally, path);
    } else if (kind < 40) {  // model.json text damaged, archive intact
      test::Archive a = base;
      m.flip_bytes(a.at("models/model.json"));
      try_load(a.bytes(), weights, what + " (model.json bytes flipped)", tally);
    } else if (kind < 75) {  // model.json structure changed
      test::Archive a = base;
      json doc = model;
      m.mutate_json(doc);
      a.at("models/model.json") = doc.dump();
      try_load(a.bytes(), weights, what + " (model.json mutated)", tally);
    } else if (kind < 88) {  // weights config structure changed
      test::Archive a = base;
      json doc = weights_cfg;
      m.mutate_json(doc);
      a.at("data/weights/model_weights_config.json") = doc.dump();
      try_load(a.bytes(), true, what + " (weights config mutated)", tally);
    } else if (kind < 94) {  // an entry deleted
      test::Archive a = base;
      a.entries.erase(a.entries.begin() + static_cast<std::ptrdiff_t>(m.below(a.entries.size())));
      try_load(a.bytes(), weights, what + " (entry deleted)", tally);
    } else {  // a weight file resized
      test::Archive a = base;
      std::vector<size_t> files;
      for (size_t k = 0; k < a.entries.size(); ++k)
        if (a.entries[k].first.find("/data/weights/weight_") != std::string::npos)
          files.push_back(k);
      if (files.empty()) continue;
      std::string& data = a.entries[files[m.below(files.size())]].second;
      data.resize(m.chance(0.7) ? m.below(data.size() + 1) : data.size() + 1 + m.below(64));
      try_load(a.bytes(), true, what + " (weight resized)", tally);
    }
  }
  std::filesystem::remove(file);
  // The mutations must exercise both outcomes; most are rejected.
  EXPECT_GT(tally.rejected, mutants / 4) << plan.fixture;
  std::printf("[ fuzz ] %-18s %4d mutants: %4d loaded, %4d rejected with anvil::Error\n",
              plan.fixture, mutants, tally.loaded, tally.rejected);
}

// Archives with large model.json files get fewer mutants so that the suite stays quick (and
// affordable under AddressSanitizer).
const FuzzPlan kPlans[] = {
    {"mlp_small", 300},        {"mlp_dynbatch", 300},     {"small_cnn", 300},
    {"const_and_buffer", 400}, {"tp_mlp_allreduce", 300}, {"tp_overlap", 300},
    {"block_tiny", 200},       {"bert_tiny", 150},        {"gpt2_tiny", 150},
    {"llama_tiny", 150},
};

class Pt2Fuzz : public ::testing::TestWithParam<FuzzPlan> {};

TEST_P(Pt2Fuzz, MutantsLoadOrRaiseAnvilError) {
  const FuzzPlan& plan = GetParam();
  uint64_t seed = 0x5eed;
  for (const char* c = plan.fixture; *c; ++c) seed = seed * 131 + static_cast<unsigned char>(*c);
  fuzz_fixture(plan, seed);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, Pt2Fuzz, ::testing::ValuesIn(kPlans),
                         [](const ::testing::TestParamInfo<FuzzPlan>& info) {
                           return std::string(info.param.fixture);
                         });

}  // namespace
}  // namespace anvil
