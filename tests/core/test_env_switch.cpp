// core/env_switch.h: the one parse of the compiler's 0 / 1 environment switches.
#include "core/env_switch.h"

#include <gtest/gtest.h>

#include "common/check.h"
#include "common/scoped_env.h"

namespace anvil {
namespace {

constexpr const char* kName = "ANVIL_TEST_ENV_SWITCH";

TEST(EnvSwitch, UnsetOrEmptyTakesTheDefaultAndZeroOrOneTheirValue) {
  ::unsetenv(kName);
  EXPECT_EQ(env_switch(kName), std::nullopt);
  EXPECT_TRUE(env_switch(kName, true));
  EXPECT_FALSE(env_switch(kName, false));
  {
    const test::ScopedEnv e(kName, "");
    EXPECT_EQ(env_switch(kName), std::nullopt);
    EXPECT_TRUE(env_switch(kName, true));
  }
  {
    const test::ScopedEnv e(kName, "1");
    EXPECT_EQ(env_switch(kName), std::optional<bool>(true));
    EXPECT_TRUE(env_switch(kName, false));
  }
  {
    const test::ScopedEnv e(kName, "0");
    EXPECT_EQ(env_switch(kName), std::optional<bool>(false));
    EXPECT_FALSE(env_switch(kName, true));
  }
}

TEST(EnvSwitch, AnyOtherValueIsAnErrorNamingTheVariableAndTheValue) {
  for (const char* bad : {"2", "yes", "true", "on", " 1", "1 ", "01", "-1"}) {
    const test::ScopedEnv e(kName, bad);
    const std::string m = test::error_message([&] { (void)env_switch(kName, true); });
    EXPECT_TRUE(test::error_says(m, "environment variable ANVIL_TEST_ENV_SWITCH is not 0 or 1"));
    EXPECT_TRUE(test::error_says(m, std::string("'") + bad + "'")) << bad;
  }
}

}  // namespace
}  // namespace anvil
