#include "engine/pending_report.h"

#include <algorithm>
#include <cinttypes>
#include <new>

#include "core/handle_bits.h"
#include "core/op_pool.h"
#include "core/var_table.h"

namespace ordo {

namespace {

// Copies what the report needs from a block that may be recycled and pushed again while it is
// read (a seqlock read: the copy counts only if the block's life word, which every push
// rewrites with a new push time, is the same before and after). The plain reads may race with
// such a push; a torn copy is thrown away, so they are left out of TSan's view.
__attribute__((no_sanitize("thread"))) bool snapshot(OpBlock* op, PendingOp* out) {
  const uint64_t before = op->life().load(std::memory_order_acquire);
  if (OpLife::state(before) == OpState::kFree) return false;
  out->kind = op->kind;
  out->waiting_grants = op->wait.load(std::memory_order_relaxed);
  out->num_links = op->num_links;
  out->index = op->index;
  const bool named = op->has_name;
  size_t i = 0;
  for (; named && i < ORDO_NAME_MAX && op->name[i] != '\0'; ++i) out->name[i] = op->name[i];
  out->name[i] = '\0';
  // Links of ops with more vars live in a separately allocated array that a later push of the
  // block may replace: only the inline ones are read.
  out->vars_shown = 0;
  if (out->num_links <= OpBlock::kInlineLinks) {
    for (uint32_t k = 0; k < out->num_links; ++k) {
      const VarLink& l = op->inline_lines[k / LinkLine::kLinks].link[k % LinkLine::kLinks];
      const VarSlot* v = l.var();
      if (!v) continue;
      out->vars[out->vars_shown++] = {v, v->index, v->gen, l.write(), l.mark()};
    }
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  const uint64_t after = op->life().load(std::memory_order_relaxed);
  if (OpLife::stamp(after) != OpLife::stamp(before) || OpLife::state(after) == OpState::kFree) {
    return false;
  }
  out->stamp = OpLife::stamp(after);
  out->ticks = OpLife::ticks(after);
  out->state = OpLife::state(after);
  return true;
}

const char* state_text(const PendingOp& op) {
  switch (op.state) {
    case OpState::kRunning:
      return op.is_callers() ? "running" : "being executed";
    case OpState::kDeferred:
      return "deferred: waiting for ordo_complete";
    case OpState::kPending:
      if (op.kind == OpKind::kWaitSignal && op.waiting_grants <= 0) {
        return "waiting for the readers before it";
      }
      return op.waiting_grants > 0 ? "queued for its vars" : "ready: waiting for a worker";
    case OpState::kFree:
      break;
  }
  return "finished";
}

const char* kind_text(OpKind k) {
  switch (k) {
    case OpKind::kUser:
      return "op";
    case OpKind::kPrepared:
      return "prepared op";
    case OpKind::kGraph:
      return "graph op";
    case OpKind::kChain:
      return "graph chain (ops run back to back)";
    case OpKind::kBundle:
      return "graph bundle (independent ops the workers run together)";
    case OpKind::kMember:
      return "graph op (of a bundle)";
    case OpKind::kWaitSignal:
      return "ordo_wait_for_var's mark";
    case OpKind::kClearError:
      return "ordo_var_clear_error";
    case OpKind::kDeleteVar:
      return "ordo_var_delete";
    case OpKind::kAsyncWait:
      return "ordo_wait_for_var_async";
  }
  return "op";
}

// "3.21 ms", "45 us", "2.5 s".
std::string duration_text(uint64_t ns) {
  char buf[32];
  if (ns >= 1000000000ull) {
    std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(ns) / 1e9);
  } else if (ns >= 1000000ull) {
    std::snprintf(buf, sizeof buf, "%.2f ms", static_cast<double>(ns) / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " us", ns / 1000);
  }
  return buf;
}

}  // namespace

bool PendingOp::touches(const VarSlot* v) const {
  for (uint32_t i = 0; i < vars_shown; ++i) {
    if (vars[i].slot == v) return true;
  }
  return false;
}

PendingReport::PendingReport(const OpPool& pool, const VarTable& vars, const LifeClock& clock,
                             uint32_t tag)
    : vars_(vars), clock_(clock), tag_(tag) {
  try {
    pool.for_each_block([&](OpBlock* op) {
      PendingOp p;
      if (snapshot(op, &p)) ops_.push_back(p);
    });
    std::sort(ops_.begin(), ops_.end(),
              [](const PendingOp& a, const PendingOp& b) { return a.stamp < b.stamp; });
  } catch (const std::bad_alloc&) {
    ops_.clear();  // a report without its list rather than an exception out of a C call
  }
}

std::string PendingReport::var_handle(uint32_t index, uint32_t gen) const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64,
                HandleBits::encode(tag_, HandleKind::kVar, gen, index));
  return buf;
}

std::string PendingReport::describe(const PendingOp& op) const {
  std::string s;
  if (op.name[0] != '\0') {
    s = std::string(kind_text(op.kind)) + " '" + op.name + "'";
  } else if (op.is_callers()) {
    s = std::string("an unnamed ") + kind_text(op.kind);
  } else {
    s = kind_text(op.kind);
  }
  s += " (";
  s += state_text(op);
  s += ") for ";
  s += duration_text(clock_.age_ns(op.ticks));
  return s;
}

std::string PendingReport::oldest(const VarSlot* only, size_t max_ops) const {
  std::string s;
  size_t named = 0;
  size_t matching = 0;
  try {
    for (const PendingOp& op : ops_) {
      if (!op.is_callers() || (only && !op.touches(only))) continue;
      ++matching;
      if (named == max_ops) continue;
      s += named == 0 ? "; oldest: " : ", ";
      s += describe(op);
      ++named;
    }
    if (matching > named) {
      char more[48];
      std::snprintf(more, sizeof more, " and %zu more", matching - named);
      s += more;
    }
  } catch (const std::bad_alloc&) {
    return std::string();
  }
  return s;
}

void PendingReport::write(std::FILE* out) const {
  size_t callers = 0;
  for (const PendingOp& op : ops_) callers += op.is_callers() ? 1 : 0;
  std::fprintf(out, "ordo engine: %zu ops pending (%zu of them the caller's), oldest first\n",
               ops_.size(), callers);
  for (const PendingOp& op : ops_) {
    std::fprintf(out, "  #%u %s", op.index, describe(op).c_str());
    for (uint32_t i = 0; i < op.vars_shown; ++i) {
      const PendingOp::Var& v = op.vars[i];
      std::fprintf(out, "%s%s var %s", i == 0 ? "; " : ", ",
                   v.mark    ? "waits on"
                   : v.write ? "mutates"
                             : "reads",
                   var_handle(v.index, v.gen).c_str());
    }
    if (op.vars_shown < op.num_links) {
      std::fprintf(out, "%s%u vars", op.vars_shown ? " and more: " : "; ", op.num_links);
    }
    std::fputc('\n', out);
  }
  write_vars_with_waits(out);
}

// Vars that a wait hangs on: a wait mark outstanding (and the waits that joined it or wait
// behind it), or waits for the var's delete.
void PendingReport::write_vars_with_waits(std::FILE* out) const {
  bool header = false;
  vars_.for_each_slot([&](VarSlot* v) {
    SpinGuard g(v->push_lock);
    if (!v->wait_mark && !v->delete_waits) return;
    size_t joined = 0, behind = 0, on_delete = 0;
    for (const WaitJoiner* j = v->joiners; j; j = j->next_joiner) ++(j->retry ? behind : joined);
    for (const WaitJoiner* j = v->delete_waits; j; j = j->next_joiner) ++on_delete;
    if (!header) {
      std::fprintf(out, "vars with waits:\n");
      header = true;
    }
    // A deleted var's handle had the generation before the one its delete moved it to.
    const uint32_t gen = v->live || v->gen <= 1 ? v->gen : v->gen - 1;
    std::fprintf(out, "  var %s%s: %s", var_handle(v->index, gen).c_str(),
                 v->live ? "" : " (deleted)", v->idle() ? "idle" : "in use");
    if (v->wait_mark) {
      std::fprintf(out, "; a wait mark %s, %zu other waits joined it, %zu wait behind it",
                   v->wait_mark == VarSlot::reserved_mark() ? "being pushed" : "outstanding",
                   joined, behind);
    }
    if (on_delete) std::fprintf(out, "; %zu waits for its delete", on_delete);
    std::fputc('\n', out);
  });
  if (!header) std::fprintf(out, "vars with waits: none\n");
}

}  // namespace ordo
