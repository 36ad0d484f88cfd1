// Internal unit test, a plain C++ program linked with the library's own objects (not through its
// exported interface, so it can reach the handle table): an engine's reference count must never
// overflow. ordo_engine_retain counts in an int32_t; past 2^31 - 1 references the count wrapped
// negative (undefined behaviour), and the live engine then said "has been released" to every
// retain and release, so it could never be freed. Reaching that through the public API takes
// 2^31 retains (about 25 s), so the count is set here one short of the most it holds.
#include <climits>
#include <cstdio>
#include <cstring>

#include "api/engine_registry.h"
#include "engine/engine_lookup.h"
#include "internal_check.h"
#include "ordo/ordo.h"

namespace {

void check(bool ok, const char* what) {
  internal_test::check(ok, what, ordo_last_error_message());
}

}  // namespace

int main() {
  ordo_engine* e = nullptr;
  check(ordo_engine_create(nullptr, &e) == ORDO_OK, "create");
  if (!e) return 1;
  ordo::EngineSlot* slot = ordo::slot_of(e);
  check(slot != nullptr, "the engine pointer is a slot of the table");
  if (!slot) return 1;
  // Core code finds live engines through the lookup the API layer installs at load time (push
  // lanes given back at thread exit depend on it): it names this engine by its tag.
  const ordo::EngineLookup& lookup = ordo::engine_lookup();
  const uint32_t tag = static_cast<uint32_t>(slot - ordo::g_engine_slots) + 1;
  check(lookup.pin != nullptr && lookup.unpin != nullptr, "the engine lookup is installed");
  if (lookup.pin) {
    check(lookup.pin(tag) == slot->engine.load(), "the lookup pins the engine of its tag");
    lookup.unpin(tag);
  }
  slot->refs.store(INT32_MAX - 1);  // as if 2^31 - 3 retains had been made
  check(ordo_engine_retain(e) == ORDO_OK, "the retain that reaches the most references works");
  check(slot->refs.load() == INT32_MAX, "the count is at its most");
  check(ordo_engine_retain(e) == ORDO_ERR_NO_MEMORY, "one more retain is refused as NO_MEMORY");
  check(std::strstr(ordo_last_error_message(), "ordo_engine_retain") != nullptr,
        "the message names the call");
  check(slot->refs.load() == INT32_MAX, "a refused retain leaves the count as it was");
  ordo_var v = 0;
  check(ordo_var_new(e, &v) == ORDO_OK, "the engine still works");
  check(ordo_engine_release(e) == ORDO_OK, "a release after the refusal works");
  check(slot->refs.load() == INT32_MAX - 1, "the release took one reference");
  slot->refs.store(1);  // back to the creator's reference alone
  check(ordo_engine_destroy(e) == ORDO_OK, "destroy frees the engine");
  check(ordo_engine_retain(e) == ORDO_ERR_INVALID_HANDLE, "a freed engine is an invalid handle");
  if (!internal_test::failed()) std::printf("engine references: all checks passed\n");
  return internal_test::failed() ? 1 : 0;
}
