// Hostile .pt2 archives: payload names in the weights configs that leave their folder, and
// archive entries whose names could become paths outside a folder. Nothing extracts a .pt2 to
// disk; names are still refused where they are looked up, with the entry or field named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/hostile_zip.h"
#include "frontend/archive_util.h"
#include "frontend/pt2_reader.h"

namespace anvil {
namespace {

using nlohmann::json;

std::string load_error(const std::string& bytes) {
  try {
    frontend::load_pt2_bytes(bytes, "hostile.pt2");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_SAYS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "'" << (part) << "' in: " << (message)

TEST(Pt2Hostile, PayloadNamesStayInTheirFolder) {
  test::Archive a = test::Archive::from_fixture("const_and_buffer");
  const json config = json::parse(a.at("data/weights/model_weights_config.json"));
  ASSERT_EQ(load_error(a.bytes()), "");
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"../../models/model.json", "a '..' component"},
      {"/etc/passwd", "an absolute path"},
      {"sub/weight_0", "a '/'"},
      {"..\\weight_0", "a backslash"},
      {std::string("weight_0\0.bin", 13), "a NUL byte"},
  };
  for (const auto& [name, problem] : bad) {
    json edited = config;
    edited["config"]["l.weight"]["path_name"] = name;
    a.at("data/weights/model_weights_config.json") = edited.dump();
    const std::string e = load_error(a.bytes());
    EXPECT_SAYS(e, "hostile.pt2");
    EXPECT_SAYS(e, "data/weights/model_weights_config.json");
    EXPECT_SAYS(e, "l.weight.path_name");
    EXPECT_SAYS(e, "unsafe payload file name: it has " + problem);
  }
}

TEST(Pt2Hostile, UnsafeEntryNamesAreRefused) {
  // The fixture's entries with one renamed (same length) after writing: ZipWriter refuses them.
  test::Archive a = test::Archive::from_fixture("const_and_buffer");
  const int w0 = a.find("data/weights/weight_0");
  ASSERT_GE(w0, 0);
  const std::string good = a.bytes();
  const std::string name = a.entries[static_cast<size_t>(w0)].first;
  for (const std::string& evil :
       {std::string("../") + name.substr(3), "/" + name.substr(1), "a\\" + name.substr(2)}) {
    std::string bytes = good;
    test::rename_entry(bytes, static_cast<size_t>(w0), evil);
    const std::string e = load_error(bytes);
    EXPECT_SAYS(e, "hostile.pt2: " + (evil[1] == '\\' ? "a\\x5c" + name.substr(2) : evil));
    EXPECT_SAYS(e, "unsafe entry name");
  }
  // A symlink entry where model.json should be.
  std::string link = good;
  const size_t c = test::central_record(link, static_cast<size_t>(a.find("models/model.json")));
  test::put_le(link, c + 4, (3 << 8) | 30, 2);
  test::put_le(link, c + 38, uint64_t{0120777} << 16, 4);
  const std::string e = load_error(link);
  EXPECT_SAYS(e, "hostile.pt2: const_and_buffer/models/model.json: ");
  EXPECT_SAYS(e, "symlink entries are not allowed");
}

}  // namespace
}  // namespace anvil
