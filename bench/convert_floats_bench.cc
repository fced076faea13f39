// ampc-bench-convert-floats: GB/s of FP32 input for FP32 -> FP16 and FP32 -> BF16 (ConvertFloats,
// kernels/numerics/convert_floats.h) on each path the CPU has, on 1 and 2 threads, and of
// ConvertConstant (passes/graph/convert_constant.h) as the passes call it.
// Usage: ampc-bench-convert-floats [MiB of FP32, default 256] [repeats, default 5]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "kernels/numerics/convert_floats.h"
#include "passes/graph/convert_constant.h"

namespace ampc {
namespace {

// Each thread converts its own part with the given path; the best of `repeats` runs.
double BestSeconds(FloatPath path, const std::vector<float>& in, std::vector<uint16_t>& out, int to,
                   int threads, int repeats) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    const size_t per = in.size() / threads;
    for (int t = 0; t < threads; ++t) {
      const size_t begin = t * per, n = t + 1 == threads ? in.size() - begin : per;
      workers.emplace_back([&, begin, n] {
        ConversionStats stats;
        if (!ConvertFloats(path, in.data() + begin, kOnnxFloat, out.data() + begin, to, n, true,
                           stats)) {
          std::abort();
        }
      });
    }
    for (std::thread& w : workers) w.join();
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count());
  }
  return best;
}

std::vector<float> RandomWeights(size_t n) {
  std::mt19937 random(1);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> in(n);
  for (float& v : in) v = normal(random);
  return in;
}

// ConvertConstant on a FLOAT tensor held in raw_data, its output allocated anew each time (as in
// a compile) and page faults included.
void TimeConvertConstant(const std::vector<float>& in, int repeats) {
  onnx::TensorProto tensor;
  tensor.set_data_type(onnx::TensorProto::FLOAT);
  tensor.add_dims(static_cast<int64_t>(in.size()));
  tensor.set_raw_data(in.data(), in.size() * 4);
  for (int to : {kOnnxFloat16, kOnnxBFloat16}) {
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      ConversionStats stats;
      const auto start = std::chrono::steady_clock::now();
      const onnx::TensorProto out = ConvertConstant(tensor, to, true, stats);
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      best = std::min(best, took.count());
    }
    std::printf("ConvertConstant -> %s: %.2f GB/s\n", to == kOnnxFloat16 ? "fp16" : "bf16",
                in.size() * 4.0 / best / 1e9);
  }
}

}  // namespace
}  // namespace ampc

int main(int argc, char** argv) {
  using namespace ampc;
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 5;
  const std::vector<float> in = RandomWeights(mib << 18);
  std::vector<uint16_t> out(in.size(), 1);  // touched once, so page faults are not timed
  std::printf("%zu MiB FP32, best of %d\n%-10s %-5s %8s %8s\n", mib, repeats, "path", "to",
              "1 thread", "2 threads");
  for (FloatPath path : {FloatPath::kScalar, FloatPath::kAvx2F16c, FloatPath::kAvx512}) {
    if (!FloatPathAvailable(path)) continue;
    for (int to : {kOnnxFloat16, kOnnxBFloat16}) {
      std::printf("%-10s %-5s", FloatPathName(path), to == kOnnxFloat16 ? "fp16" : "bf16");
      for (int threads : {1, 2}) {
        const double s = BestSeconds(path, in, out, to, threads, repeats);
        std::printf(" %8.2f", in.size() * 4.0 / s / 1e9);
      }
      std::printf("  GB/s\n");
    }
  }
  TimeConvertConstant(in, repeats);
  return 0;
}
