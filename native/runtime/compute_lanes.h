// Which compute lane a model's or a head's calls run on (bridge.h): setComputeLane / computeLane, so that a trainer
// can give each agent sharing a CPU a lane of its own and run the agents concurrently.
#pragma once

#include <napi.h>

namespace comlrl {

void InitComputeLanes(Napi::Env env, Napi::Object exports);

}  // namespace comlrl
