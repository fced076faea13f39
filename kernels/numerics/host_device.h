// AMPC_HD marks a function for both the host and the device under nvcc, and is empty for a host
// compiler: the device math headers (num.h, broadcast_plan.h, reduce_math.h) are checked on the
// host by tests and compiled into the kernels unchanged.
#ifndef AMPC_KERNELS_NUMERICS_HOST_DEVICE_H_
#define AMPC_KERNELS_NUMERICS_HOST_DEVICE_H_

#ifdef __CUDACC__
#define AMPC_HD __host__ __device__
#else
#define AMPC_HD
#endif

#endif  // AMPC_KERNELS_NUMERICS_HOST_DEVICE_H_
