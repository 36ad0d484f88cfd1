// EngineLookup: how core code that outlives an engine's calls (a thread's push-lane cache, given
// back when the thread exits) learns whether the engine behind a handle tag still lives, and
// keeps its memory while it uses it, without knowing the API layer's handle table. The API layer
// (api/engine_registry.cpp) installs the two functions when the library loads; core code calls
// them. So the include arrow runs from api/ down to core/, never up.
#pragma once

#include <cstdint>

namespace ordo {

class Engine;

struct EngineLookup {
  // The live engine with this handle tag, its memory kept until unpin(tag); nullptr if none.
  Engine* (*pin)(uint32_t tag) = nullptr;
  void (*unpin)(uint32_t tag) = nullptr;
};

// Installed once, before any engine exists (a static initializer of the API layer).
void install_engine_lookup(const EngineLookup& lookup);
const EngineLookup& engine_lookup();

}  // namespace ordo
