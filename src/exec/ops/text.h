// Text ops on integer tokens: TfIdfVectorizer. (String tensors do not exist in ATen.)
#pragma once

#include "exec/op_info.h"

namespace qforge {

void registerTextOps(OpRegistry& registry);

}  // namespace qforge
