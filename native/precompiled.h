// The headers nearly every translation unit includes, compiled once per build (CMake's precompiled header, node-gyp's
// -include of the same file): parsing <torch/torch.h> costs ~10 s per translation unit, loading it precompiled < 1 s.
// Only headers that are the same for every file belong here; each file still includes what it uses.
#pragma once

#include <napi.h>
#include <torch/torch.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
