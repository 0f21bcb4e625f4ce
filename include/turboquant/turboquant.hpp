// Umbrella header: everything a user of the CPU library needs, and the
// registry of every backend (backend.hpp; link turboquant::backends).
#pragma once

#include "turboquant/backend.hpp"
#include "turboquant/cache_view.hpp"
#include "turboquant/codebook.hpp"
#include "turboquant/cpu.hpp"
#include "turboquant/decode.hpp"
#include "turboquant/dequantize.hpp"
#include "turboquant/dtype.hpp"
#include "turboquant/encode.hpp"
#include "turboquant/format.hpp"
#include "turboquant/status.hpp"
