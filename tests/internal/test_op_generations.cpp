// Internal unit test, a plain C++ program built from the engine's own op pool sources: a block's
// completion generation must never wrap. A completion handle names (block index, generation);
// a block that came back with a generation it had before would make an old, already used handle
// valid again for an unrelated op (ordo_complete promises INVALID_HANDLE for it). Reaching the
// wrap through the public API takes about 1.6 billion deferred ops, so the block is set up here
// one use short of it.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/handle_bits.h"
#include "core/op_pool.h"
#include "internal_check.h"

namespace {

using internal_test::check;

// Releases `op` as a use that deferred, starting at generation `gen`, then takes blocks until
// one is `op` again or `tries` blocks came out; returns the block found or nullptr.
ordo::OpBlock* release_deferred_and_look_for(ordo::OpPool& pool, ordo::OpBlock* op, uint32_t gen,
                                             int tries) {
  op->gen = gen;
  op->deferred = true;
  pool.release(op, nullptr);
  std::vector<ordo::OpBlock*> taken;
  ordo::OpBlock* found = nullptr;
  for (int i = 0; i < tries && !found; ++i) {
    ordo::OpBlock* b = pool.acquire(nullptr);
    if (!b) break;
    if (b == op) found = b;
    taken.push_back(b);
  }
  for (ordo::OpBlock* b : taken) {
    if (b != found) pool.release(b, nullptr);
  }
  return found;
}

}  // namespace

int main() {
  ordo::OpPool pool(nullptr);
  ordo::OpBlock* op = pool.acquire(nullptr);
  check(op != nullptr, "the pool gives a block");
  if (!op) return 1;

  // An ordinary deferred use: the block comes back with the next generation.
  ordo::OpBlock* again = release_deferred_and_look_for(pool, op, 5, 4096);
  check(again == op, "a block released after a deferred use is reused");
  check(again && again->gen == 6, "its generation moved on by one");

  // The last generation: the block must be retired, never handed out again.
  if (again) {
    ordo::OpBlock* after_last =
        release_deferred_and_look_for(pool, op, ordo::kGenerationMask, 4096);
    check(after_last == nullptr, "a block whose generations are all used is never reused");
  }
  if (internal_test::failed()) return 1;
  std::printf("op generations: ok\n");
  return 0;
}
