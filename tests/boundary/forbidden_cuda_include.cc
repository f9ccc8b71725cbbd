// Must NOT compile: lib/model is the CPU backend and may not use the GPU kernels (only
// lib/cuda_model and eval's `bench gpu` do), so kernels/cuda is not on its include path.
#include "kernels/cuda/kv_layout.h"

int cb_boundary_probe_forbidden_cuda() {
  return 0;
}
