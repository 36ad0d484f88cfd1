#include "engine/engine_lookup.h"

namespace ordo {

namespace {
EngineLookup g_lookup;
}  // namespace

void install_engine_lookup(const EngineLookup& lookup) {
  g_lookup = lookup;
}

const EngineLookup& engine_lookup() {
  return g_lookup;
}

}  // namespace ordo
