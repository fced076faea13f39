#include "compiler/export_weights.h"

#include <zlib.h>

#include <cstdint>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "compiler/exit_codes.h"
#include "compiler/file_io.h"
#include "compiler/model_io.h"
#include "passes/graph/status_macros.h"
#include "passes/verify_input.h"
#include "runtime/core/tensor_proto.h"
#include "runtime/npy.h"

ABSL_DECLARE_FLAG(std::string, output);

namespace ampc {
namespace {

constexpr absl::string_view kFoldedFromSuffix = "folded_from";

// The one value a dynamo export's constant folding made `name` from, or "" when its value_info
// records none or several. The metadata value is a Python list repr: "['a.weight']".
std::string FoldedFromOne(const onnx::GraphProto& graph, const std::string& name) {
  for (const auto& info : graph.value_info()) {
    if (info.name() != name) continue;
    for (const auto& prop : info.metadata_props()) {
      if (!absl::EndsWith(prop.key(), kFoldedFromSuffix)) continue;
      absl::string_view list = absl::StripAsciiWhitespace(prop.value());
      if (!absl::ConsumePrefix(&list, "[") || !absl::ConsumeSuffix(&list, "]")) return "";
      if (list.empty() || absl::StrContains(list, ",")) return "";
      list = absl::StripAsciiWhitespace(list);
      if (list.size() < 2 || (list.front() != '\'' && list.front() != '"') ||
          list.back() != list.front()) {
        return "";
      }
      return std::string(list.substr(1, list.size() - 2));
    }
  }
  return "";
}

// Whether every reader of `name` in `graph`, following Cast nodes, is a MatMul's second input:
// x @ val, the Linear whose weight W the export folded into val = W^T.
bool OnlyMatMulWeight(const onnx::GraphProto& graph, const std::string& name, int depth = 0) {
  if (depth > 4) return false;
  bool read = false;
  for (const auto& node : graph.node()) {
    for (int i = 0; i < node.input_size(); ++i) {
      if (node.input(i) != name) continue;
      read = true;
      if (node.op_type() == "MatMul" && node.domain().empty() && i == 1) continue;
      if (node.op_type() != "Cast" || !OnlyMatMulWeight(graph, node.output(0), depth + 1)) {
        return false;
      }
    }
  }
  return read;
}

Tensor Transposed(const Tensor& matrix) {
  const int64_t rows = matrix.dim(0), cols = matrix.dim(1);
  Tensor out = Tensor::Host(DType::kFloat, {cols, rows});
  const float* in = matrix.data<float>();
  float* data = out.data<float>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) data[c * rows + r] = in[r * cols + c];
  }
  return out;
}

// The initializers the export writes: update_binding keys and BatchNormalization statistics.
std::set<std::string> ExportedInitializers(const onnx::ModelProto& model) {
  std::set<std::string> chosen;
  for (const auto& binding : model.training_info(0).update_binding()) chosen.insert(binding.key());
  for (const auto& node : model.graph().node()) {
    if (node.op_type() != "BatchNormalization" || !node.domain().empty()) continue;
    for (int slot = 3; slot <= 4 && slot < node.input_size(); ++slot)
      chosen.insert(node.input(slot));
  }
  return chosen;
}

void Put16(std::string& out, uint32_t v) {
  out.push_back(static_cast<char>(v & 0xff));
  out.push_back(static_cast<char>((v >> 8) & 0xff));
}
void Put32(std::string& out, uint32_t v) {
  Put16(out, v & 0xffff);
  Put16(out, v >> 16);
}

// The fields a ZIP local header and its central directory entry share (stored, UTF-8 names,
// 1980-01-01 00:00 so that the same weights give the same bytes).
void PutEntryFields(std::string& out, uint32_t crc, uint32_t size, const std::string& name) {
  Put16(out, 20);                       // version needed: 2.0
  Put16(out, 1 << 11);                  // flags: the name is UTF-8
  Put16(out, 0);                        // method: stored
  Put16(out, 0);                        // time
  Put16(out, (0 << 9) | (1 << 5) | 1);  // date
  Put32(out, crc);
  Put32(out, size);  // compressed
  Put32(out, size);  // uncompressed
  Put16(out, static_cast<uint32_t>(name.size()));
  Put16(out, 0);  // extra field length
}

}  // namespace

absl::StatusOr<std::vector<ExportedWeight>> WeightsToExport(const onnx::ModelProto& model) {
  if (model.training_info_size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a training model (", model.training_info_size(),
                     " training_info entries, not 1; compile one with ampc MODEL -o OUT --train)"));
  }
  const onnx::GraphProto& graph = model.graph();
  const std::set<std::string> chosen = ExportedInitializers(model);
  std::set<std::string> initializers;
  for (const auto& t : graph.initializer()) initializers.insert(t.name());
  std::vector<ExportedWeight> weights;
  std::set<std::string> taken;
  for (const auto& t : graph.initializer()) {
    if (!chosen.contains(t.name())) continue;
    const bool trained = t.data_type() == onnx::TensorProto::FLOAT;
    if (!trained) {
      bool bound = false;
      for (const auto& b : model.training_info(0).update_binding()) bound |= b.key() == t.name();
      if (!bound) continue;  // a statistic of a BatchNormalization that is not FP32: no master
      return absl::InvalidArgumentError(absl::StrCat(
          "trained initializer '", t.name(), "' is ",
          onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(t.data_type())),
          ", not FLOAT (ampc keeps FP32 master weights; was the model edited?)"));
    }
    absl::StatusOr<Tensor> value = TensorFromProto(t);
    if (!value.ok()) return absl::InvalidArgumentError(value.status().message());
    ExportedWeight weight{t.name(), t.name(), false, *std::move(value)};
    const std::string source = FoldedFromOne(graph, t.name());
    if (!source.empty() && weight.value.rank() == 2 && !initializers.contains(source) &&
        !taken.contains(source) && OnlyMatMulWeight(graph, t.name())) {
      weight.name = source;
      weight.transposed = true;
      weight.value = Transposed(weight.value);
    }
    if (!taken.insert(weight.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("two weights are named '", weight.name, "'"));
    }
    weights.push_back(std::move(weight));
  }
  return weights;
}

absl::StatusOr<std::string> EncodeNpz(const std::vector<ExportedWeight>& weights) {
  constexpr uint64_t kZipLimit = 0xffffffffu;  // ZIP without ZIP64: 32-bit sizes and offsets
  if (weights.size() > 0xffff) {
    return absl::InvalidArgumentError(
        absl::StrCat(weights.size(),
                     " weights are more than a .npz without ZIP64 holds (65535); use "
                     ".safetensors"));
  }
  std::string out, directory;
  for (const ExportedWeight& w : weights) {
    const std::string name = w.name + ".npy";
    const std::string npy = EncodeNpy(w.value);
    if (out.size() + 30 + name.size() + npy.size() > kZipLimit) {
      return absl::InvalidArgumentError(
          absl::StrCat("the weights exceed the 4 GiB a .npz without ZIP64 holds (at '", w.name,
                       "'); use .safetensors"));
    }
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(npy.data()), static_cast<uInt>(npy.size())));
    const uint32_t size = static_cast<uint32_t>(npy.size());
    const uint32_t offset = static_cast<uint32_t>(out.size());
    Put32(out, 0x04034b50);
    PutEntryFields(out, crc, size, name);
    out += name;
    out += npy;
    Put32(directory, 0x02014b50);
    Put16(directory, 20);  // version made by: 2.0, MS-DOS attributes
    PutEntryFields(directory, crc, size, name);
    Put16(directory, 0);  // comment length
    Put16(directory, 0);  // disk number
    Put16(directory, 0);  // internal attributes
    Put32(directory, 0);  // external attributes
    Put32(directory, offset);
    directory += name;
  }
  if (out.size() + directory.size() + 22 > kZipLimit) {
    return absl::InvalidArgumentError(
        "the weights exceed the 4 GiB a .npz without ZIP64 holds; use .safetensors");
  }
  const uint32_t directory_offset = static_cast<uint32_t>(out.size());
  out += directory;
  Put32(out, 0x06054b50);
  Put16(out, 0);  // this disk
  Put16(out, 0);  // the directory's disk
  Put16(out, static_cast<uint32_t>(weights.size()));
  Put16(out, static_cast<uint32_t>(weights.size()));
  Put32(out, static_cast<uint32_t>(directory.size()));
  Put32(out, directory_offset);
  Put16(out, 0);  // comment length
  return out;
}

absl::StatusOr<std::string> EncodeSafetensors(const std::vector<ExportedWeight>& weights) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const ExportedWeight& w : weights) {
    if (w.name == "__metadata__") {
      return absl::InvalidArgumentError(
          "a weight is named '__metadata__', which safetensors "
          "reserves; use .npz");
    }
    const uint64_t end = offset + w.value.bytes();
    header[w.name] = {
        {"dtype", "F32"}, {"shape", w.value.shape()}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned
  std::string out;
  out.reserve(8 + text.size() + offset);
  Put32(out, static_cast<uint32_t>(text.size() & 0xffffffffu));
  Put32(out, static_cast<uint32_t>(static_cast<uint64_t>(text.size()) >> 32));
  out += text;
  for (const ExportedWeight& w : weights) {
    out.append(static_cast<const char*>(w.value.raw()), w.value.bytes());
  }
  return out;
}

absl::Status ExportWeightsCommand(const std::vector<std::string>& args) {
  constexpr char kUsage[] = "usage: ampc export-weights MODEL -o WEIGHTS.npz|WEIGHTS.safetensors";
  if (args.size() != 2) return UsageError(kUsage);
  const std::string& input = args[1];
  const std::string output = absl::GetFlag(FLAGS_output);
  if (output.empty())
    return UsageError(absl::StrCat("ampc export-weights needs -o FILE (", kUsage, ")"));
  const bool npz = absl::EndsWith(output, ".npz");
  if (!npz && !absl::EndsWith(output, ".safetensors")) {
    return UsageError(
        absl::StrCat("-o ", output, ": the name must end in .npz or .safetensors (the format)"));
  }
  AMPC_RETURN_IF_ERROR(CheckWritable(output));
  if (SameFile(input, output)) {
    return UsageError(
        absl::StrCat("-o ", output, " is the input file; ampc never overwrites its input"));
  }
  AMPC_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModel(input));
  AMPC_RETURN_IF_ERROR(CheckVersions(loaded.model, input));
  if (loaded.model.training_info_size() > 0) {
    if (absl::Status s = CheckTrainingInfo(loaded.model); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(input, ": ", s.message()));
    }
  }
  NoteInputs(input, loaded);
  AMPC_RETURN_IF_ERROR(CheckNotInput(output, "-o"));
  absl::StatusOr<std::vector<ExportedWeight>> weights = WeightsToExport(loaded.model);
  absl::StatusOr<std::string> bytes = !weights.ok() ? weights.status()
                                      : npz         ? EncodeNpz(*weights)
                                                    : EncodeSafetensors(*weights);
  if (!bytes.ok()) {
    return absl::Status(bytes.status().code(), absl::StrCat(input, ": ", bytes.status().message()));
  }
  TempFile file(output);
  AMPC_RETURN_IF_ERROR(file.Create());
  AMPC_RETURN_IF_ERROR(file.Write(bytes->data(), bytes->size()));
  AMPC_RETURN_IF_ERROR(file.Close());
  AMPC_RETURN_IF_ERROR(file.Commit());
  SyncDirectory(output);
  RemoveStaleTempFiles(output);
  int transposed = 0;
  for (const ExportedWeight& w : *weights) transposed += w.transposed ? 1 : 0;
  std::cerr << "ampc: wrote " << weights->size() << " FP32 weights to " << output;
  if (transposed > 0) {
    std::cerr << " (" << transposed
              << " folded Linear weights under their PyTorch names, transposed back)";
  }
  std::cerr << "\n";
  return absl::OkStatus();
}

}  // namespace ampc
