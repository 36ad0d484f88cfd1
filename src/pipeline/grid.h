// Grid: a pipeline's lines x pipes cells, each with a join counter (docs/ARCHITECTURE.md, "How a
// pipeline run becomes engine work"). Cell (l, f) may run when its counter reaches 0. It waits
// for (l, f-1) of the same token (for f = 0: (l, P-1) of the line's previous token, as a line
// holds one token at a time) and, when pipe f is serial, for (l-1, f): the token accepted just
// before. Whoever brings a counter to 0 runs the cell or hands it to the engine; nobody waits.
// Counters are re-armed when their cell starts, which is safe because neither dependency of
// the cell's next use can finish before this use has started (both follow it in the serial
// chain or on the line).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "ordo/ordo.h"

namespace ordo {

class Pipeline;

// One cell. A line task's op carries a pointer to it as user_data, so it knows its place and
// its pipeline. A cache line each: the counters of neighbouring cells are decremented by
// different workers at once.
struct alignas(64) Cell {
  std::atomic<int32_t> join{0};
  uint32_t line = 0;
  uint32_t pipe = 0;
  Pipeline* owner = nullptr;
  Cell* next_local = nullptr;  // Pipeline::drive's list of cells it runs itself
};

// What pipe 0 accepted on a line, read by the line's later pipes.
struct alignas(64) LineToken {
  uint64_t token = 0;
  uint64_t deferrals = 0;
};

class Grid {
 public:
  // Allocates the cells (throws std::bad_alloc; the grid is then unchanged).
  void build(Pipeline* owner, uint32_t num_lines, uint32_t num_pipes);
  uint32_t num_lines() const { return lines_; }
  uint32_t num_pipes() const { return pipes_; }
  Cell& at(uint32_t line, uint32_t pipe) { return cells_[size_t{line} * pipes_ + pipe]; }
  LineToken& token_of(uint32_t line) { return tokens_[line]; }
  // Sets every counter for a run whose first token is accepted on `first_line`: that line's
  // pipe-0 cell runs at once; the other pipe-0 cells wait only for the step before them, since
  // their lines hold no token yet; the first line's later cells wait only for their own token,
  // as no token comes before it in this run; every other cell waits as its pipe's type says.
  // `types` holds ORDO_PIPE_* per pipe (PARALLEL = 1 and SERIAL = 2 are the counts).
  void arm(uint32_t first_line, const int32_t* types);
  // Counts one dependency of `c` as done: true when it was the last.
  static bool signal(Cell& c) { return c.join.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<LineToken[]> tokens_;
  uint32_t lines_ = 0;
  uint32_t pipes_ = 0;
};

inline void Grid::build(Pipeline* owner, uint32_t num_lines, uint32_t num_pipes) {
  std::unique_ptr<Cell[]> cells(new Cell[size_t{num_lines} * num_pipes]);
  std::unique_ptr<LineToken[]> tokens(new LineToken[num_lines]);
  for (uint32_t l = 0; l < num_lines; ++l) {
    for (uint32_t f = 0; f < num_pipes; ++f) {
      Cell& c = cells[size_t{l} * num_pipes + f];
      c.line = l;
      c.pipe = f;
      c.owner = owner;
    }
  }
  cells_ = std::move(cells);
  tokens_ = std::move(tokens);
  lines_ = num_lines;
  pipes_ = num_pipes;
}

inline void Grid::arm(uint32_t first_line, const int32_t* types) {
  for (uint32_t l = 0; l < lines_; ++l) {
    const bool first = l == first_line;
    at(l, 0).join.store(first ? 0 : 1, std::memory_order_relaxed);
    for (uint32_t f = 1; f < pipes_; ++f) {
      at(l, f).join.store(first ? 1 : types[f], std::memory_order_relaxed);
    }
  }
}

}  // namespace ordo
