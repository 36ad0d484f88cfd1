package ordo

// #include "shim.h"
import "C"

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"runtime/cgo"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// PipeFunc is a pipe's function, called once per token that passes the pipe (pipe 0: once per
// invocation, see Pipeflow.Defer), with a Pipeflow that describes the token. Returning a non-nil
// error, or panicking, fails the run, as for an op's function: an *OpError chooses the code,
// any other error or a panic is DefaultOpCode.
type PipeFunc func(pf *Pipeflow) error

// Pipe is one pipe of a pipeline: its function, and whether it is parallel (up to one token per
// line at once, in any order) or serial (one token at a time, in the order pipe 0 accepted
// them). The first pipe must be serial.
type Pipe struct {
	Fn       PipeFunc
	Parallel bool
}

// SerialPipe is Pipe{Fn: fn}: a pipe that sees the tokens one at a time, in the order pipe 0
// accepted them.
func SerialPipe(fn PipeFunc) Pipe { return Pipe{Fn: fn} }

// ParallelPipe is Pipe{Fn: fn, Parallel: true}: a pipe that runs up to one token per line at
// once, in any order.
func ParallelPipe(fn PipeFunc) Pipe { return Pipe{Fn: fn, Parallel: true} }

// Pipeline is a task-parallel pipeline with token deferral (ordo_pipeline_*), run on an
// engine's workers: pipe 0 generates tokens 0, 1, 2, ... until its function calls
// Pipeflow.Stop; every token then visits the other pipes in order, on one line (token k mod
// lines, without deferral), and a line holds one token at a time, so that per-line data indexed
// by Pipeflow.Line is the token's until it leaves the last pipe. Create it with
// Engine.NewPipeline.
//
// The pipes' functions run on the engine's workers (for KindNaive, on the goroutine that runs
// the pipeline), never two of one serial pipe at once. They may push ops, but must not wait on
// or run pipelines of their own engine (ErrWouldDeadlock), and must not call runtime.Goexit.
// The functions are kept until Destroy (or until ResetPipes replaces them).
//
// Destroy a Pipeline when done with it (ErrInvalidState while a pushed run is in flight: wait
// for it first). One dropped undestroyed is destroyed by its finalizer, on a goroutine of its
// own; while a pushed run is in flight then, it tries again after a later garbage collection.
// Every method is safe for concurrent use (one run at a time: a second gets ErrInvalidState).
type Pipeline struct {
	e         *Engine // keeps the Go engine (and its finalizer) behind every run
	p         uintptr // ordo_pipeline*: a slot of a table, reused after 65,535 creations
	st        *pipeState
	destroyed uint32 // atomic; set once Destroy succeeded: p is never passed to C again

	mu      sync.Mutex // guards what follows, held across the C calls that replace or free them
	handles []cgo.Handle
	lines   int
	npipes  int
}

// pipeState is what the pipe functions of one pipeline share: the failures of the current run.
// It does not reference the Pipeline, so that a dropped Pipeline can be finalized.
type pipeState struct {
	mu       sync.Mutex
	failures []pipeFailure // in the order the functions returned; the one Run reports first
}

type pipeFailure struct {
	pipe  int
	token uint64
	code  int32
	msg   string // the failure's text (opFailure)
	err   error  // the function's error, or an *OpError "panic: ..."
}

// pipeRec is what a pipe's cgo.Handle holds.
type pipeRec struct {
	fn PipeFunc
	st *pipeState
}

// livePipes counts the pipe functions held by cgo.Handles (by pipelines not yet destroyed).
var livePipes int64

// newPipeHandles makes one handle per pipe, and the type array for C. A nil function is
// ErrInvalidArgument (fn names the call), as is an empty list; then nothing is kept.
func newPipeHandles(fn string, pipes []Pipe, st *pipeState) ([]cgo.Handle, []C.int64_t, []C.uintptr_t, error) {
	if len(pipes) == 0 {
		return nil, nil, nil, &Error{Code: StatusInvalidArgument, Message: fn + ": no pipes"}
	}
	for i, p := range pipes {
		if p.Fn == nil {
			return nil, nil, nil, &Error{Code: StatusInvalidArgument,
				Message: fmt.Sprintf("%s: pipe %d has a nil function", fn, i)}
		}
	}
	hs := make([]cgo.Handle, len(pipes))
	types := make([]C.int64_t, len(pipes))
	ptrs := make([]C.uintptr_t, len(pipes))
	for i, p := range pipes {
		hs[i] = cgo.NewHandle(&pipeRec{fn: p.Fn, st: st})
		ptrs[i] = C.uintptr_t(hs[i])
		types[i] = C.ORDO_PIPE_SERIAL
		if p.Parallel {
			types[i] = C.ORDO_PIPE_PARALLEL
		}
	}
	atomic.AddInt64(&livePipes, int64(len(hs)))
	return hs, types, ptrs, nil
}

func deletePipeHandles(hs []cgo.Handle) {
	for _, h := range hs {
		h.Delete()
	}
	atomic.AddInt64(&livePipes, -int64(len(hs)))
}

func linesArg(fn string, lines int, zeroOK bool) (C.uint32_t, error) {
	if lines < 0 || lines > math.MaxUint32 || (lines == 0 && !zeroOK) {
		return 0, &Error{Code: StatusInvalidArgument,
			Message: fmt.Sprintf("%s: lines must be 1 to 65,536, not %d", fn, lines)}
	}
	return C.uint32_t(lines), nil
}

// NewPipeline creates a pipeline of the given number of lines (1 to 65,536: at most that many
// tokens are between pipe 0 and the end at once) over pipes (pipe 0 serial) on e. Errors:
// ErrInvalidArgument (lines out of range, no pipes, a nil function, a parallel first pipe, more
// than 2^20 lines x pipes), ErrShutdown or ErrInvalidHandle after Close, ErrNoMemory.
func (e *Engine) NewPipeline(lines int, pipes ...Pipe) (*Pipeline, error) {
	n, err := linesArg("NewPipeline", lines, false)
	if err != nil {
		return nil, err
	}
	st := &pipeState{}
	hs, types, ptrs, err := newPipeHandles("NewPipeline", pipes, st)
	if err != nil {
		return nil, err
	}
	r := C.ordo_go_pipeline_create(C.uintptr_t(e.p), n, &types[0], &ptrs[0], C.size_t(len(pipes)))
	runtime.KeepAlive(e)
	if err := check(r); err != nil {
		deletePipeHandles(hs)
		return nil, err
	}
	p := &Pipeline{e: e, p: uintptr(r.value), st: st, handles: hs, lines: lines, npipes: len(pipes)}
	runtime.SetFinalizer(p, (*Pipeline).finalize)
	return p, nil
}

// live refuses a destroyed pipeline here rather than passing its handle on: the handle's slot is
// reused after 65,535 creations, when it would name another pipeline.
func (p *Pipeline) live(fn string) error {
	if atomic.LoadUint32(&p.destroyed) != 0 {
		return &Error{Code: StatusInvalidHandle, Message: fn + ": the pipeline was destroyed"}
	}
	return nil
}

// Lines returns the number of lines.
func (p *Pipeline) Lines() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lines
}

// NumPipes returns the number of pipes.
func (p *Pipeline) NumPipes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.npipes
}

// Run runs the pipeline until pipe 0 stops and every token it accepted has left the last pipe,
// and returns then (blocking one OS thread; for KindNaive the pipe functions run on it). Token
// ids and lines continue from the previous run unless the pipeline was reset.
//
// It returns nil, or an *Error:
//   - ErrTokensDropped when tokens whose deferral could never be resolved were dropped (Dropped
//     lists them); the rest of the run is intact and the pipeline may run again;
//   - ErrOpFailed when a pipe function failed: OpCode is its code, Err its error (a panic: an
//     *OpError "panic: ..."), so errors.Is and errors.As see through to it, and Message names
//     the pipe, the token and its line, and ends with the error's text. The tokens in flight
//     are drained without calling more functions, and the pipeline needs Reset before it runs
//     again;
//   - before anything runs: ErrInvalidState (a run in flight, pushed or not, or a Reset
//     needed), ErrWouldDeadlock (from inside a pipe function or op of the same engine),
//     ErrShutdown (the engine is closed), ErrInvalidHandle (after Destroy).
func (p *Pipeline) Run() error {
	if err := p.live("Run"); err != nil {
		return err
	}
	err := check(C.ordo_go_pipeline_run(C.uintptr_t(p.p)))
	runtime.KeepAlive(p)
	var oe *Error
	if errors.As(err, &oe) && oe.Code == StatusOpFailed {
		p.st.explain(oe)
	}
	return err
}

// explain gives a run's ORDO_ERR_OP_FAILED the failure it reports: the pipe function named by
// the message (when several failed at once, the library reports one of them), its code and
// error, whose text ends the message. That failure becomes the first, for Err.
func (st *pipeState) explain(e *Error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.failures) == 0 {
		return // not a Go function's failure (out of memory for the deferral tables)
	}
	pick := 0
	if pipe, token, ok := failureIn(e.Message); ok {
		for i, f := range st.failures {
			if f.pipe == pipe && f.token == token {
				pick = i
				break
			}
		}
	}
	f := st.failures[pick]
	st.failures[0], st.failures[pick] = st.failures[pick], st.failures[0]
	e.OpCode = f.code
	e.Err = f.err
	e.Message += ": " + f.msg
}

// failureIn reads the pipe and the token from the library's message for a failed run:
// "pipe P failed on token T (line L); ...".
func failureIn(msg string) (pipe int, token uint64, ok bool) {
	i := strings.Index(msg, "pipe ")
	j := strings.Index(msg, " on token ")
	if i < 0 || j < i {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(msg[i:], "pipe %d", &pipe); err != nil {
		return 0, 0, false
	}
	if _, err := fmt.Sscanf(msg[j:], " on token %d", &token); err != nil {
		return 0, 0, false
	}
	return pipe, token, true
}

// Err returns the error with which a pipe function failed the last run, pushed or not (a panic:
// an *OpError "panic: ..."), or nil. When several failed at once: the one Run reported, else
// the first to return. It stays until Reset or ResetPipes. For a pushed run, whose failure
// reaches the waiters on its vars as the library's message and the function's code only, this
// is the way to the function's error.
func (p *Pipeline) Err() error {
	p.st.mu.Lock()
	defer p.st.mu.Unlock()
	if len(p.st.failures) == 0 {
		return nil
	}
	return p.st.failures[0].err
}

func (st *pipeState) clear() {
	st.mu.Lock()
	st.failures = nil
	st.mu.Unlock()
}

func (st *pipeState) record(f pipeFailure) {
	st.mu.Lock()
	st.failures = append(st.failures, f)
	st.mu.Unlock()
}

// Push pushes one run of the pipeline as an op of its engine, ordered like any op by the vars it
// reads and writes: the run starts when the ops pushed before it on them are done, and ops
// pushed after it on them wait for the whole run. It returns at once (KindNaive: the run may
// happen inside it). Options: WithName, WithPriority (also that of the run's steps), WithProp
// (the op that starts the run; the steps run on the normal workers).
//
// The op fails (a wait on a var it writes returns ErrOpFailed) when a pipe function fails (OpCode:
// its code; Err returns its error) or when tokens are dropped (OpCode: int32(StatusTokensDropped)).
// The run is in flight until its op has finished: Run, Push, Reset, ResetPipes, Dropped and
// Destroy return ErrInvalidState meanwhile. Errors (nothing pushed): ErrInvalidHandle (a deleted
// or nil var, after Destroy), ErrInvalidState, ErrShutdown, ErrNoMemory.
func (p *Pipeline) Push(reads, writes []*Var, opts ...PushOption) error {
	if err := p.live("Push"); err != nil {
		return err
	}
	cfg := pushOptions(opts)
	gpu, err := cfg.shimGPU("Pipeline.Push")
	if err != nil {
		return err
	}
	rp, wp, err := varHandles("Push", reads, writes)
	if err != nil {
		return err
	}
	r := C.ordo_go_pipeline_push(C.uintptr_t(p.p), rp, C.size_t(len(reads)), wp,
		C.size_t(len(writes)), C.int32_t(cfg.priority), C.int32_t(cfg.prop), gpu, cfg.cname())
	runtime.KeepAlive(p)
	runtime.KeepAlive(reads)
	runtime.KeepAlive(writes)
	return check(r)
}

// Reset restarts the pipeline: token ids and lines start at 0 again, the dropped list and a
// failed run's error (Err) are cleared. ErrInvalidState while a run is in flight.
func (p *Pipeline) Reset() error {
	if err := p.live("Reset"); err != nil {
		return err
	}
	err := check(C.ordo_go_pipeline_reset(C.uintptr_t(p.p)))
	runtime.KeepAlive(p)
	if err == nil {
		p.st.clear()
	}
	return err
}

// ResetPipes replaces the pipes and, when lines is not 0, the number of lines, then resets the
// pipeline as Reset does. The old pipes' functions are let go. On failure nothing changes:
// ErrInvalidArgument as for NewPipeline, ErrInvalidState while a run is in flight.
func (p *Pipeline) ResetPipes(lines int, pipes ...Pipe) error {
	if err := p.live("ResetPipes"); err != nil {
		return err
	}
	n, err := linesArg("ResetPipes", lines, true)
	if err != nil {
		return err
	}
	hs, types, ptrs, err := newPipeHandles("ResetPipes", pipes, p.st)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	err = check(C.ordo_go_pipeline_reset_pipes(C.uintptr_t(p.p), n, &types[0], &ptrs[0],
		C.size_t(len(pipes))))
	runtime.KeepAlive(p)
	if err != nil {
		deletePipeHandles(hs)
		return err
	}
	deletePipeHandles(p.handles) // no run is in flight: nothing calls them any more
	p.handles = hs
	p.npipes = len(pipes)
	if lines != 0 {
		p.lines = lines
	}
	p.st.clear()
	return nil
}

// NumTokens returns the number of tokens generated since the last reset (the next fresh id; a
// deferred token counts, even one later dropped; the id pipe 0 stopped on does not). While a
// run is in flight, a snapshot.
func (p *Pipeline) NumTokens() (uint64, error) {
	if err := p.live("NumTokens"); err != nil {
		return 0, err
	}
	r := C.ordo_go_pipeline_num_tokens(C.uintptr_t(p.p))
	runtime.KeepAlive(p)
	if err := check(r); err != nil {
		return 0, err
	}
	return uint64(r.value), nil
}

// Dropped returns the ids of the tokens the last run dropped, ascending (empty, not nil, when
// none), until the next run or reset. ErrInvalidState while a run is in flight.
func (p *Pipeline) Dropped() ([]uint64, error) {
	if err := p.live("Dropped"); err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(p)
	r := C.ordo_go_pipeline_dropped(C.uintptr_t(p.p), nil, 0)
	if err := check(r); err != nil {
		return nil, err
	}
	ids := make([]uint64, uint64(r.value))
	if len(ids) == 0 {
		return ids, nil
	}
	r = C.ordo_go_pipeline_dropped(C.uintptr_t(p.p), (*C.uint64_t)(unsafe.Pointer(&ids[0])),
		C.size_t(len(ids)))
	if err := check(r); err != nil {
		return nil, err
	}
	if uint64(r.value) < uint64(len(ids)) { // another run ended in between
		ids = ids[:r.value]
	}
	return ids, nil
}

// Destroy destroys the pipeline and lets go of its pipes' functions. It returns ErrInvalidState,
// and does nothing, while a run is in flight; ErrInvalidHandle when destroyed before. It works
// after the engine's Close.
func (p *Pipeline) Destroy() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.live("Destroy"); err != nil {
		return err
	}
	err := check(C.ordo_go_pipeline_destroy(C.uintptr_t(p.p)))
	runtime.KeepAlive(p)
	if err != nil {
		return err
	}
	atomic.StoreUint32(&p.destroyed, 1)
	runtime.SetFinalizer(p, nil)
	deletePipeHandles(p.handles)
	p.handles = nil
	return nil
}

// finalize destroys an unreachable pipeline on a goroutine of its own; refused because a pushed
// run is still in flight, it tries again at a later collection.
func (p *Pipeline) finalize() {
	go func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		err := check(C.ordo_go_pipeline_destroy(C.uintptr_t(p.p)))
		switch {
		case err == nil:
			atomic.StoreUint32(&p.destroyed, 1)
			deletePipeHandles(p.handles)
			p.handles = nil
		case errors.Is(err, ErrInvalidState):
			runtime.SetFinalizer(p, (*Pipeline).finalize)
		} // anything else would be a bug: the functions are kept, since C may still call them
	}()
}

// Pipeflow describes the token a pipe function runs, and lets pipe 0 steer token generation.
// Token, Line, Pipe and NumDeferrals describe the invocation it was given to (also after it
// returned); Stop and Defer work only inside that function, on its goroutine, and return
// ErrInvalidState elsewhere (another goroutine, or once the function has returned).
type Pipeflow struct {
	pf        uintptr // ordo_pipeflow*: a process-unique token, not a pointer
	token     uint64
	line      int
	pipe      int
	deferrals int
	live      uint32 // atomic: 1 while the function runs
}

// Token returns the token's id. In pipe 0: for a fresh token the next id, for a resumed
// deferred token its own id.
func (f *Pipeflow) Token() uint64 { return f.token }

// Line returns the line that runs the function (0 .. lines-1). In pipes >= 1 the token's line,
// the index of its per-line data; in pipe 0 the line whose step runs, which a deferring token
// does not keep.
func (f *Pipeflow) Line() int { return f.line }

// Pipe returns the pipe that runs the function (0 .. pipes-1).
func (f *Pipeflow) Pipe() int { return f.pipe }

// NumDeferrals returns how many earlier pipe-0 invocations of this token deferred (in pipes >=
// 1: the final count).
func (f *Pipeflow) NumDeferrals() int { return f.deferrals }

func (f *Pipeflow) expired(fn string) error {
	if atomic.LoadUint32(&f.live) == 0 {
		return &Error{Code: StatusInvalidState,
			Message: fn + ": a Pipeflow is valid only inside the pipe function it was given to, " +
				"and that has returned"}
	}
	return nil
}

// Stop ends token generation (pipe 0 only): this token is discarded (a resumed deferred one is
// reported as dropped), the targets it named with Defer are forgotten, pipe 0 is not called
// again in this run, and the tokens already accepted run to the end. ErrInvalidState in
// another pipe (the run goes on), from another goroutine, or after the function returned.
func (f *Pipeflow) Stop() error {
	if err := f.expired("Stop"); err != nil {
		return err
	}
	return check(C.ordo_go_pipeflow_stop(C.uintptr_t(f.pf)))
}

// Defer makes this token wait for token to be accepted by pipe 0 (pipe 0 only): the token
// leaves pipe 0 unaccepted, its line takes the next token, and pipe 0 is called for it again
// (NumDeferrals one higher) once every valid target of this invocation has been accepted. Valid
// targets are ids not generated yet and tokens deferred right now; others (the token itself,
// one already accepted or ready) are ignored, and when none is valid the token is called again
// at once: branch on NumDeferrals. A token whose targets are never accepted is dropped at the
// end of the run (ErrTokensDropped). ErrInvalidState as for Stop.
func (f *Pipeflow) Defer(token uint64) error {
	if err := f.expired("Defer"); err != nil {
		return err
	}
	return check(C.ordo_go_pipeflow_defer(C.uintptr_t(f.pf), C.uint64_t(token)))
}

// call runs a pipe's function; a panic fails it with the panic's value as its message (as for
// an op).
func (f *Pipeflow) call(fn PipeFunc) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &OpError{Code: DefaultOpCode, Message: fmt.Sprintf("panic: %v", r)}
		}
	}()
	return fn(f)
}
