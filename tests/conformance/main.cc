// The suite's main: gtest, or the peer process of a process test (process_test.cc).
#include <gtest/gtest.h>

#include "harness.h"

int main(int argc, char** argv) {
  if (conduit::conformance::is_child_invocation(argc, argv)) return conduit::conformance::child_main(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
