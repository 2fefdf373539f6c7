// The rpc suites' main: gtest, or a child server process (--rpc-serve URL NAME).
#include <gtest/gtest.h>

#include "rpc_harness.h"

int main(int argc, char** argv) {
  if (conduit::rpctest::is_child_invocation(argc, argv)) return conduit::rpctest::child_main(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
