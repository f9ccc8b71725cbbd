#include "kernels/cpu/parts.h"

#include <cblas.h>

#include <algorithm>

namespace cb::kernels::cpu {

int kernel_threads() {
  return std::clamp(openblas_get_num_threads(), 1, 16);
}

}  // namespace cb::kernels::cpu
