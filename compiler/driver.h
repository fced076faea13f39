// The `ampc` command: parses the command line, runs the requested job, returns the exit code.
#pragma once

namespace ampc {

// Diagnostics go to stderr, one line each; model text (`print`, --print-after) to stdout.
int RunCli(int argc, char** argv);

}  // namespace ampc
