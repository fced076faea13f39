// Philox4x32-10, the counter-based generator of Salmon et al., "Parallel random numbers: as easy
// as 1, 2, 3" (SC 2011), as Random123 defines it: 10 rounds of two 32x32->64 multiplications
// (0xD2511F53, 0xCD9E8D57) with the key bumped by the Weyl constants (0x9E3779B9, 0xBB67AE85)
// after each round. A pure function of (key, counter): the Dropout masks built from it
// (dropout_kernels.cc, docs/training.md "Dropout") depend on nothing a checkpoint does not hold.
// Host and device code alike (AMPC_HOST_DEVICE), so a CUDA kernel draws the same words.
#pragma once

#include <array>
#include <cstdint>

#if defined(__CUDACC__)
#define AMPC_HOST_DEVICE __host__ __device__
#else
#define AMPC_HOST_DEVICE
#endif

namespace ampc {

struct Philox4x32 {
  uint32_t v[4];
};

AMPC_HOST_DEVICE inline Philox4x32 Philox4x32_10(Philox4x32 counter, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t* c = counter.v;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return counter;
}

// Whether element `i` of a Dropout that draws with `seed` on its `call`-th run (0-based) is kept:
// word i % 4 of Philox4x32-10 with key (seed low 32 bits, high 32 bits) and counter
// (i / 4 low, high, call low, high), read as u = word * 2^-32 in [0, 1), keeps when u >= ratio.
// (A kernel draws each block once for its four elements; this is the definition.)
AMPC_HOST_DEVICE inline bool DropoutKeeps(uint64_t seed, uint64_t call, uint64_t i, float ratio) {
  const uint64_t block = i / 4;
  const Philox4x32 words =
      Philox4x32_10({{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32),
                      static_cast<uint32_t>(call), static_cast<uint32_t>(call >> 32)}},
                    static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  return static_cast<double>(words.v[i % 4]) * 0x1.0p-32 >= static_cast<double>(ratio);
}

}  // namespace ampc
