// The interface every pass implements, and the context a pipeline threads through them
// (docs/architecture.md). A pass gets its options when it is constructed (passes/registry.h),
// reads and changes the model through the context, reports what it noticed as diagnostics, and
// says whether it changed the model.
#pragma once

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/graph/graph_index.h"
#include "passes/precision_plan.h"

namespace ampc {

class TypeSnapshot;  // verify_changes.h

// Something a pass noticed that is not an error (errors are the Status it returns). The driver
// prints it as one line, `FILE: warning: MESSAGE`; the report keeps its fields.
struct Diagnostic {
  enum class Severity { kWarning };
  Severity severity = Severity::kWarning;
  std::string pass;     // the pass that reported it (set by RunPasses)
  std::string node;     // the node it is about, if one: its name, or "#INDEX" when unnamed
  std::string value;    // the value it is about, if one
  std::string message;  // the whole text, naming the node or value in words too
};

// What a pass did. `index_stale`: it added, removed or rewired nodes or values (or their types),
// so the context's index no longer describes the model. A plain bool means both or neither.
struct PassResult {
  PassResult(bool changed) : changed(changed), index_stale(changed) {}  // NOLINT(runtime/explicit)
  PassResult(bool changed, bool index_stale) : changed(changed), index_stale(index_stale) {}
  bool changed;
  bool index_stale;
};

// What a pass works on. `file` is the model's path as the user gave it; every error names it.
struct ModelContext {
  ModelContext(onnx::ModelProto& model, std::string file) : model(model), file(std::move(file)) {}

  onnx::ModelProto& model;
  std::string file;
  std::vector<Diagnostic> diagnostics;  // in the order they were reported
  std::shared_ptr<PrecisionPlan> plan;  // set by autocast, applied by insert-casts
  std::string loss;                     // set by loss-op: the loss it added, which the step trains
  // Set by infer-types: the types strict inference accepted, against which verify checks what
  // the later passes changed.
  std::shared_ptr<const TypeSnapshot> inferred_types;

  void Warn(std::string message, std::string node = "", std::string value = "");
  // The index of the model as it is: built on first use and kept until a pass reports that it
  // made it stale (RunPasses drops it then).
  absl::StatusOr<std::shared_ptr<const GraphIndex>> Index();
  void DropIndex() { index_.reset(); }

 private:
  std::shared_ptr<const GraphIndex> index_;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Kebab-case, as used by --passes and --print-after.
  virtual absl::string_view Name() const = 0;
  // Stateless between runs.
  virtual absl::StatusOr<PassResult> Run(ModelContext& context) = 0;
};

// Runs `pass` on `context`: its diagnostics get its name, and the index is dropped when the pass
// made it stale.
absl::StatusOr<PassResult> RunPass(Pass& pass, ModelContext& context);

}  // namespace ampc
