// WorkerHost: what a worker thread needs from whoever owns its group (the engine), and nothing
// more: a hook as the thread starts, running one ready op, and telling waiters about the
// completions it has counted. The executor calls this narrow interface, so exec/ knows nothing
// of the engine and can be read (and tested) on its own.
#pragma once

namespace ordo {

struct OpBlock;
struct Worker;

class WorkerHost {
 public:
  // On the worker's own thread, before it takes any op.
  virtual void enter_worker(Worker* w) = 0;
  // Runs a ready op on worker `self` (its callback, then its completion).
  virtual void execute(OpBlock* op, Worker* self) = 0;
  // The worker is about to look for work or sleep: announce what it has completed.
  virtual void flush_completions(Worker* w) = 0;
  // The worker has just woken from sleeping for lack of work.
  virtual void worker_woke(Worker* w) = 0;
  // A worker's thread was ended by the code it ran (a forced unwind): whether to start another
  // in its place now (someone waits for the engine's work) rather than at the next refill.
  virtual bool replace_ended_workers_now() = 0;

 protected:
  ~WorkerHost() = default;
};

}  // namespace ordo
