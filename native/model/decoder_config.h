// The decoder config as TypeScript sends it (src/models/config.ts's DecoderConfig) into the native DecoderConfig.
// TypeScript has already read and checked config.json; this only checks that each field is present and well formed.
#pragma once

#include <napi.h>

#include "decoder.h"

namespace comlrl {

DecoderConfig ReadDecoderConfig(const Napi::Object& config);

}  // namespace comlrl
