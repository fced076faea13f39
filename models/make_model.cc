// ampc-models NAME -o FILE [--seed N] [size flags]: writes a bundled model.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/model_io.h"
#include "models/cnn.h"
#include "models/mlp.h"
#include "models/transformer.h"

namespace {

using ampc::models::TransformerOptions;

constexpr char kUsage[] = R"(usage: ampc-models NAME -o FILE [--seed N] [size flags]

Writes one of the bundled models (docs/models.md) as ONNX (opset 17, IR version 8). The same
options give the same file, byte for byte.

models:
  mlp          Fashion-MNIST MLP 784-256-128-10: image float[N,784], label int64[N]
  cnn          Fashion-MNIST CNN 2x[Conv-BN-Relu-MaxPool] + 2 Gemm: image float[N,1,28,28]
  transformer  pre-LN transformer encoder classifier: tokens int64[N,seq], label int64[N]
All write the outputs logits float[N,classes] and loss (mean softmax cross-entropy).

flags:
  -o FILE      where to write the model (required)
  --seed N     seed of the weight initialisation (default 0)
transformer size flags:
  --vocab N    vocabulary size (default 1000)
  --seq N      sequence length (default 32)
  --hidden N   model width (default 64)
  --heads N    attention heads, dividing --hidden (default 4)
  --layers N   encoder layers (default 2)
  --ffn N      MLP width (default 4 * hidden)
  --classes N  output classes (default 10)
)";

struct SizeFlag {
  const char* name;
  int64_t TransformerOptions::*field;
};
constexpr SizeFlag kTransformerFlags[] = {
    {"--vocab", &TransformerOptions::vocab},    {"--seq", &TransformerOptions::seq},
    {"--hidden", &TransformerOptions::hidden},  {"--heads", &TransformerOptions::heads},
    {"--layers", &TransformerOptions::layers},  {"--ffn", &TransformerOptions::ffn},
    {"--classes", &TransformerOptions::classes}};

template <typename T>
bool ParseNumber(const std::string& text, T& value) {
  const char* end = text.data() + text.size();
  auto [ptr, error] = std::from_chars(text.data(), end, value);
  return error == std::errc() && ptr == end;
}

struct Command {
  std::string name, output;
  uint32_t seed = 0;
  TransformerOptions transformer;
  bool transformer_flags = false;  // a transformer size flag was given
};

// Empty on success, else what is wrong with the command line.
std::string Parse(int argc, char** argv, Command& command) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "-o" && has_value) {
      command.output = argv[++i];
      continue;
    }
    if (arg == "--seed" && has_value) {
      if (!ParseNumber(argv[++i], command.seed)) {
        return "--seed wants a number, not '" + std::string(argv[i]) + "'";
      }
      continue;
    }
    bool size_flag = false;
    for (const SizeFlag& flag : kTransformerFlags) {
      if (arg != flag.name || !has_value) continue;
      if (!ParseNumber(argv[++i], command.transformer.*flag.field)) {
        return arg + " wants a number, not '" + argv[i] + "'";
      }
      size_flag = command.transformer_flags = true;
    }
    if (size_flag) continue;
    if (!command.name.empty() || arg.empty() || arg[0] == '-') return "unexpected '" + arg + "'";
    command.name = arg;
  }
  if (command.name.empty()) return "no model named";
  if (command.output.empty()) return "no -o FILE";
  if (command.transformer_flags && command.name != "transformer") {
    return "size flags are for the transformer only";
  }
  return "";
}

absl::StatusOr<onnx::ModelProto> Build(const Command& command) {
  if (command.name == "mlp") {
    ampc::models::MlpOptions options;
    options.seed = command.seed;
    return ampc::models::BuildMlp(options);
  }
  if (command.name == "cnn") {
    ampc::models::CnnOptions options;
    options.seed = command.seed;
    return ampc::models::BuildCnn(options);
  }
  if (command.name == "transformer") {
    TransformerOptions options = command.transformer;
    options.seed = command.seed;
    return ampc::models::BuildTransformer(options);
  }
  return absl::InvalidArgumentError("unknown model '" + command.name +
                                    "' (mlp, cnn or transformer)");
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help" || std::string(argv[i]) == "-h") {
      std::cout << kUsage;
      return 0;
    }
  }
  Command command;
  if (std::string problem = Parse(argc, argv, command); !problem.empty()) {
    std::cerr << "ampc-models: " << problem << "\n" << kUsage;
    return 2;
  }
  absl::StatusOr<onnx::ModelProto> model = Build(command);
  if (!model.ok()) {
    std::cerr << "ampc-models: error: " << model.status().message() << "\n";
    return 2;
  }
  absl::Status saved = ampc::SaveModel(*model, command.output);
  if (!saved.ok()) {
    std::cerr << "ampc-models: error: " << saved.message() << "\n";
    return 3;
  }
  return 0;
}
