// main() of ampc_device_tests: gtest's, plus a stack trace on a crash (a fault in a test takes
// the whole binary down, and a lent GPU machine has no debugger to ask where).
#include <gtest/gtest.h>

#include "absl/debugging/failure_signal_handler.h"
#include "absl/debugging/symbolize.h"

int main(int argc, char** argv) {
  absl::InitializeSymbolizer(argv[0]);
  absl::InstallFailureSignalHandler(absl::FailureSignalHandlerOptions());
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
