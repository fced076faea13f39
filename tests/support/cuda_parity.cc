#include "tests/support/cuda_parity.h"

#include <cmath>
#include <random>
#include <sstream>

#include "kernels/cpu/cpu_kernels.h"
#include "passes/float_support.h"
#include "passes/opset/training_ops.h"
#include "runtime/core/cpu_backend.h"
#include "runtime/session.h"
#include "tests/support/model_text.h"

#ifdef AMPC_HAVE_CUDA
#include "runtime/core/cuda_backend.h"
#include "runtime/core/cuda_device.h"
#endif

namespace ampc::testing {
namespace {

template <typename T>
void Fill(Tensor& tensor, ValueRange range, std::mt19937& rng) {
  T* data = tensor.data<T>();
  if constexpr (std::is_integral_v<typename Compute<T>::type>) {
    std::uniform_int_distribution<int64_t> dist(static_cast<int64_t>(range.low),
                                                static_cast<int64_t>(range.high) - 1);
    for (int64_t i = 0; i < tensor.size(); ++i) data[i] = static_cast<T>(dist(rng));
  } else {
    std::uniform_real_distribution<double> dist(range.low, range.high);
    for (int64_t i = 0; i < tensor.size(); ++i) {
      data[i] = Compute<T>::Store(static_cast<typename Compute<T>::type>(dist(rng)));
    }
  }
}

// The elements as doubles (bool and integers exactly).
std::vector<double> AsDoubles(const Tensor& tensor) {
  std::vector<double> values(tensor.size());
  Dispatch<AMPC_ALL_TYPES>(tensor.dtype(), [&]<typename T>() {
    for (int64_t i = 0; i < tensor.size(); ++i) {
      values[i] = static_cast<double>(Compute<T>::Load(tensor.data<T>()[i]));
    }
  });
  return values;
}

bool IsFloating(DType dtype) {
  return dtype == DType::kFloat || dtype == DType::kDouble || dtype == DType::kFloat16 ||
         dtype == DType::kBFloat16;
}

}  // namespace

bool CudaUsable() {
#ifdef AMPC_HAVE_CUDA
  return CudaDeviceCount() > 0;
#else
  return false;
#endif
}

std::vector<Tensor> RandomInputs(const onnx::ModelProto& model,
                                 const std::map<std::string, ValueRange>& ranges, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Tensor> inputs;
  for (const onnx::ValueInfoProto& input : model.graph().input()) {
    const auto& type = input.type().tensor_type();
    Shape shape;
    for (const auto& dim : type.shape().dim()) shape.push_back(dim.dim_value());
    Tensor tensor = Tensor::Host(static_cast<DType>(type.elem_type()), shape);
    auto range = ranges.find(input.name());
    const ValueRange r = range == ranges.end() ? ValueRange{} : range->second;
    if (tensor.dtype() == DType::kBool) {
      std::bernoulli_distribution coin;
      for (int64_t i = 0; i < tensor.size(); ++i) tensor.data<bool>()[i] = coin(rng);
    } else {
      Dispatch<AMPC_FLOAT_TYPES, AMPC_INT_TYPES>(tensor.dtype(),
                                                 [&]<typename T>() { Fill<T>(tensor, r, rng); });
    }
    inputs.push_back(std::move(tensor));
  }
  return inputs;
}

std::string CompareOutputs(const Tensor& expected, const Tensor& actual, double tolerance) {
  std::ostringstream why;
  if (expected.dtype() != actual.dtype() || expected.shape() != actual.shape()) {
    why << "expected " << expected.TypeString() << ", got " << actual.TypeString();
    return why.str();
  }
  const std::vector<double> e = AsDoubles(expected), a = AsDoubles(actual);
  const bool floating = IsFloating(expected.dtype());
  double diff = 0, norm = 0, worst = -1;
  int64_t worst_at = -1;
  for (size_t i = 0; i < e.size(); ++i) {
    const bool e_finite = std::isfinite(e[i]), a_finite = std::isfinite(a[i]);
    const bool same_special = !e_finite && (std::isnan(e[i]) ? std::isnan(a[i]) : e[i] == a[i]);
    if (!floating || !e_finite || !a_finite) {
      if (e[i] == a[i] || same_special) continue;
      why << "element " << i << ": expected " << e[i] << ", got " << a[i];
      return why.str();
    }
    const double d = std::abs(a[i] - e[i]);
    diff += d * d;
    norm += e[i] * e[i];
    if (d > worst) worst = d, worst_at = static_cast<int64_t>(i);
  }
  const double error = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
  if (error <= tolerance) return "";
  why << "relative L2 error " << error << " > " << tolerance << "; worst element " << worst_at
      << ": expected " << e[worst_at] << ", got " << a[worst_at];
  return why.str();
}

void ExpectRunsOnCpuWithCudaKernels(const ParityCase& parity) {
  RegisterAmpcSchemas();
  const onnx::ModelProto model = ParseModelText(parity.model);
  CpuBackend cpu(1);
  auto session = Session::Create(model, DefaultRegistry(), cpu);
  ASSERT_TRUE(session.ok()) << session.status();
  auto outputs = (*session)->Run(RandomInputs(model, parity.ranges, parity.seed));
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  const OpsetVersions opsets = OpsetsOf(model);
  for (const onnx::NodeProto& node : model.graph().node()) {
    if (node.op_type() == "Constant") continue;  // the executor takes its value
    const std::string domain = node.domain() == "ai.onnx" ? "" : node.domain();
    const int opset = opsets.contains(domain) ? opsets.at(domain) : 0;
    EXPECT_TRUE(DefaultRegistry().Has(domain, node.op_type(), "cuda", opset))
        << node.op_type() << " has no CUDA kernel for its version";
  }
}

void ExpectCudaMatchesCpu(const ParityCase& parity) {
#ifdef AMPC_HAVE_CUDA
  RegisterAmpcSchemas();
  const onnx::ModelProto model = ParseModelText(parity.model);
  const std::vector<Tensor> inputs = RandomInputs(model, parity.ranges, parity.seed);
  CpuBackend cpu(2);
  auto cuda = CudaBackend::Create(0);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  auto reference = Session::Create(model, DefaultRegistry(), cpu);
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto device = Session::Create(model, DefaultRegistry(), **cuda);
  ASSERT_TRUE(device.ok()) << device.status();
  auto expected = (*reference)->Run(inputs);
  ASSERT_TRUE(expected.ok()) << expected.status();
  std::vector<Tensor> device_inputs = inputs;
  if (parity.inputs_on_gpu) {
    for (Tensor& input : device_inputs) {
      auto on_gpu = OnBackend(input, **cuda);
      ASSERT_TRUE(on_gpu.ok()) << on_gpu.status();
      input = *std::move(on_gpu);
    }
  }
  auto actual = (*device)->Run(device_inputs);
  ASSERT_TRUE(actual.ok()) << actual.status();
  ASSERT_EQ(expected->size(), actual->size());
  for (size_t i = 0; i < expected->size(); ++i) {
    auto host = ToHost((*actual)[i]);
    ASSERT_TRUE(host.ok()) << host.status();
    const std::string why = CompareOutputs((*expected)[i], *host, parity.tolerance);
    EXPECT_TRUE(why.empty()) << "output '" << model.graph().output(i).name() << "': " << why;
  }
#else
  (void)parity;
  GTEST_FAIL() << "ExpectCudaMatchesCpu called in a build without the CUDA backend";
#endif
}

}  // namespace ampc::testing
