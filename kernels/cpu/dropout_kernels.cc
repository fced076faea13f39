// Dropout (ONNX) and ai.ampc.Dropout (the training step's, docs/training-design.md). Both draw
// their masks from Philox4x32-10 (philox.h): element i of a run is kept when DropoutKeeps(seed,
// call, i, ratio), kept elements are scaled by 1/(1 - ratio) (in the compute type), dropped ones
// are 0. The standard op counts its own runs (call 0, 1, ... in a session: a fresh session repeats
// the sequence); ai.ampc.Dropout reads the call from its fourth input, which the step computes
// from the checkpointed counters, so a resumed run draws the masks an uninterrupted one would.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/norm_common.h"
#include "kernels/cpu/philox.h"

namespace ampc {
namespace {

// The seed of a Dropout node without a `seed` attribute: runs are reproducible.
constexpr uint64_t kDefaultDropoutSeed = 0x5eed'd50b'0a7c'0de5ULL;

absl::Status UnsupportedMask(const KernelContext& context, const Tensor& mask) {
  return NodeError(context, absl::StrCat("mask has element type ", DTypeName(mask.dtype()),
                                         ", which is not supported"));
}

// The mask: bool from opset 10, X's type before (all ones there, as only inference exists).
absl::Status WriteMask(KernelContext& context, const Shape& shape, const std::vector<bool>* keep) {
  AMPC_ASSIGN_OR_RETURN(Tensor * mask, context.Output(1, shape));
  const bool handled = Dispatch<AMPC_FLOAT_TYPES, DType::kBool>(mask->dtype(), [&]<typename T>() {
    T* p = mask->data<T>();
    const int64_t n = mask->size();
    for (int64_t i = 0; i < n; ++i) {
      const bool k = keep == nullptr || (*keep)[i];
      p[i] = ampc::Compute<T>::Store(static_cast<typename ampc::Compute<T>::type>(k ? 1 : 0));
    }
  });
  return handled ? absl::OkStatus() : UnsupportedMask(context, *mask);
}

// Inference (no training_mode input, or false, or ratio 0; and every opset before 12 for the
// standard op): Y is X itself and the mask all true. Training: the masks of `seed` at `call`.
// `call` is read only when the node drops.
template <typename CallFn>
absl::Status ComputeDropout(KernelContext& context, bool standard, uint64_t seed, CallFn call) {
  const Tensor& x = context.in(0);
  float ratio = context.attributes().Float("ratio", 0.5f);
  bool training = false;
  if (!standard || context.info().opset >= 12) {
    ratio = 0.5f;
    if (const Tensor* r = context.input(1); r != nullptr) {
      std::vector<float> value;
      if (!LoadWidened(*r, value) || value.size() != 1) {
        return NodeError(context, absl::StrCat("ratio must be one float, got ", r->TypeString()));
      }
      ratio = value[0];
    }
    if (const Tensor* t = context.input(2); t != nullptr) {
      if (t->dtype() != DType::kBool || t->size() != 1) {
        return NodeError(context,
                         absl::StrCat("training_mode must be one bool, got ", t->TypeString()));
      }
      training = t->data<bool>()[0];
    }
  }
  if (!training || ratio == 0.0f) {
    context.SetOutput(0, x);
    return WantsOutput(context, 1) ? WriteMask(context, x.shape(), nullptr) : absl::OkStatus();
  }
  if (!(ratio > 0.0f && ratio < 1.0f)) {
    return NodeError(context, absl::StrCat("ratio must be in [0, 1), got ", ratio));
  }
  AMPC_ASSIGN_OR_RETURN(const uint64_t n, call());
  std::vector<bool> keep(static_cast<size_t>(x.size()));
  for (uint64_t block = 0; block * 4 < keep.size(); ++block) {
    const Philox4x32 words =
        Philox4x32_10({{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                        static_cast<uint32_t>(n), static_cast<uint32_t>(n >> 32)}},
                      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    for (uint64_t j = 0; j < 4 && block * 4 + j < keep.size(); ++j) {
      keep[block * 4 + j] = static_cast<double>(words.v[j]) * 0x1.0p-32 >= ratio;
    }
  }
  absl::Status status;
  Dispatch<AMPC_FLOAT_TYPES>(x.dtype(), [&]<typename T>() {
    using C = typename ampc::Compute<T>::type;
    absl::StatusOr<Tensor*> y = context.Output(0, x.shape());
    if (!y.ok()) {
      status = y.status();
      return;
    }
    const C scale = C{1} / (C{1} - static_cast<C>(ratio));
    const T* px = x.data<T>();
    T* py = (*y)->data<T>();
    for (size_t i = 0; i < keep.size(); ++i) {
      py[i] = ampc::Compute<T>::Store(keep[i] ? ampc::Compute<T>::Load(px[i]) * scale : C{0});
    }
  });
  AMPC_RETURN_IF_ERROR(status);
  return WantsOutput(context, 1) ? WriteMask(context, x.shape(), &keep) : absl::OkStatus();
}

uint64_t SeedOf(const KernelInfo& info) {
  return info.attributes().Has("seed") ? static_cast<uint64_t>(info.attributes().Int("seed", 0))
                                       : kDefaultDropoutSeed;
}

// ONNX Dropout: run k of this kernel (0-based, counted from the session's start) is call k.
class DropoutKernel final : public OpKernel {
 public:
  explicit DropoutKernel(const KernelInfo& info) : seed_(SeedOf(info)) {}

  absl::Status Compute(KernelContext& context) override {
    return ComputeDropout(context, /*standard=*/true, seed_,
                          [this]() -> absl::StatusOr<uint64_t> { return runs_++; });
  }

 private:
  const uint64_t seed_;
  std::atomic<uint64_t> runs_{0};
};

// ai.ampc.Dropout(data, ratio, training_mode, call): `call` an int64 scalar >= 0.
class AmpcDropoutKernel final : public OpKernel {
 public:
  explicit AmpcDropoutKernel(const KernelInfo& info) : seed_(SeedOf(info)) {}

  absl::Status Compute(KernelContext& context) override {
    return ComputeDropout(
        context, /*standard=*/false, seed_, [&context]() -> absl::StatusOr<uint64_t> {
          const Tensor* c = context.input(3);
          if (c == nullptr || c->dtype() != DType::kInt64 || c->size() != 1 ||
              c->data<int64_t>()[0] < 0) {
            return NodeError(context,
                             "input 3 (call) must be one int64 >= 0, got " +
                                 (c == nullptr ? std::string("nothing") : c->TypeString()));
          }
          return static_cast<uint64_t>(c->data<int64_t>()[0]);
        });
  }

 private:
  const uint64_t seed_;
};

}  // namespace

void RegisterDropoutKernels(KernelRegistry& r) {
  const std::vector<DType> floats = {AMPC_FLOAT_TYPES};
  r.Register(KernelDef{"",
                       "Dropout",
                       "cpu",
                       {{0, floats}, {1, floats}, {2, {DType::kBool}}},
                       [](const KernelInfo& info) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
                         return std::make_unique<DropoutKernel>(info);
                       }});
  r.Register(KernelDef{"ai.ampc",
                       "Dropout",
                       "cpu",
                       {{0, floats}, {1, floats}, {2, {DType::kBool}}, {3, {DType::kInt64}}},
                       [](const KernelInfo& info) -> absl::StatusOr<std::unique_ptr<OpKernel>> {
                         return std::make_unique<AmpcDropoutKernel>(info);
                       }});
}

}  // namespace ampc
