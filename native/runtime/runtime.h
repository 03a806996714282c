// Process-wide facts and settings: libtorch version, devices, threads, BLAS; and the measured compute ceilings the
// bench suite compares against.
#pragma once

#include <napi.h>

namespace comlrl {

void InitRuntime(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
