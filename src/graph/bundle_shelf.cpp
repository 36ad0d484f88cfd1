#include "graph/bundle_shelf.h"

namespace ordo {

BundleShelf::~BundleShelf() {
  while (BundleRun* r = free_) {
    free_ = r->next_free;
    delete r;
  }
}

void BundleShelf::stock(uint32_t runs) {
  for (uint32_t i = 0; i < runs; ++i) {
    auto* r = new BundleRun(capacity_, workers_);  // throws: the shelf frees what it has
    r->members = members_;
    r->hook = hook_;
    r->retire = &BundleShelf::retire;
    r->owner = this;
    r->next_free = free_;
    free_ = r;
  }
}

BundleRun* BundleShelf::take() {
  SpinGuard g(lock_);
  BundleRun* r = free_;
  if (r) {
    free_ = r->next_free;
    ++out_;
  }
  return r;
}

void BundleShelf::retire(BundleRun* run) {
  auto* shelf = static_cast<BundleShelf*>(run->owner);
  bool last = false;
  {
    SpinGuard g(shelf->lock_);
    --shelf->out_;
    if (!shelf->closed_) {
      run->next_free = shelf->free_;
      shelf->free_ = run;
      return;
    }
    last = shelf->out_ == 0;
  }
  delete run;
  if (last) delete shelf;
}

void BundleShelf::close() {
  BundleRun* free_runs = nullptr;
  bool last = false;
  {
    SpinGuard g(lock_);
    closed_ = true;
    free_runs = free_;
    free_ = nullptr;
    last = out_ == 0;
  }
  while (BundleRun* r = free_runs) {
    free_runs = r->next_free;
    delete r;
  }
  if (last) delete this;  // else the last run out frees it
}

}  // namespace ordo
