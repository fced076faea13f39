// ampc-models NAME -o FILE [--seed N]: writes a bundled model.
#include <cstdlib>
#include <iostream>
#include <string>

#include "compiler/model_io.h"
#include "models/mlp.h"

int main(int argc, char** argv) {
  std::string name, output;
  uint32_t seed = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "-o" && i + 1 < argc) {
      output = argv[++i];
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    } else if (name.empty() && arg[0] != '-') {
      name = arg;
    } else {
      name.clear();
      break;
    }
  }
  if (name != "mlp" || output.empty()) {
    std::cerr << "usage: ampc-models mlp -o FILE [--seed N]\n";
    return 2;
  }
  ampc::models::MlpOptions options;
  options.seed = seed;
  absl::Status saved = ampc::SaveModel(ampc::models::BuildMlp(options), output);
  if (!saved.ok()) {
    std::cerr << "ampc-models: error: " << saved.message() << "\n";
    return 3;
  }
  return 0;
}
