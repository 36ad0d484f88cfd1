// Package ordo is the Go binding of ordo, a task dependency engine (libordo.so).
//
// An Engine runs ops: Go functions pushed with the variables (Vars) they read and the ones they
// write. Two ops that share a Var, where at least one writes it, run in push order; readers of a
// Var may run at the same time; everything else runs concurrently on the engine's worker threads.
// An op that fails (returns an error or panics) puts the Vars it writes into an error state; ops
// that use such a Var are skipped and pass the error on, and a wait on it returns an *Error that
// errors.Is(err, ErrOpFailed).
//
//	e, _ := ordo.NewEngine()
//	defer e.Close()
//	v, _ := e.NewVar()
//	x := 0
//	e.Push(func(*ordo.Exec) error { x++; return nil }, nil, []*ordo.Var{v})
//	e.Push(func(*ordo.Exec) error { x *= 10; return nil }, nil, []*ordo.Var{v})
//	err := e.Wait(v) // x == 10
//
// Engine.Capture records a goroutine's pushes into a Graph, which Graph.Launch pushes again as
// many times as wanted (ordo_graph_*). Engine.NewPipeline makes a Pipeline: a task-parallel
// pipeline of serial and parallel pipes with token deferral, run on the engine's workers, or
// pushed as an op ordered through vars (ordo_pipeline_*).
//
// Every method is safe for concurrent use. Op functions run on engine threads (on the pushing
// goroutine's thread for the naive engine); they may push further ops but must not wait on their
// own engine (that returns ErrWouldDeadlock) and must not call runtime.Goexit (t.FailNow).
//
// The library is found with pkg-config (package ordo); build with -tags ordo_nopkgconfig to
// pass CGO_CFLAGS and CGO_LDFLAGS by hand instead.
package ordo

// #include "shim.h"
// #include <stdlib.h>
import "C"

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Version returns the loaded library's version string, such as "0.1.0".
func Version() string { return C.GoString(C.ordo_version_string()) }

// Kind selects how an engine runs its ops.
type Kind int32

const (
	KindDefault   Kind = C.ORDO_ENGINE_DEFAULT    // env ORDO_ENGINE, else KindPerDevice
	KindNaive     Kind = C.ORDO_ENGINE_NAIVE      // each op runs inside its Push: a debugging aid
	KindPooled    Kind = C.ORDO_ENGINE_POOLED     // one shared pool of CPU workers
	KindPerDevice Kind = C.ORDO_ENGINE_PER_DEVICE // worker groups per device and per property
)

// Prop selects which workers run an op.
type Prop int32

const (
	PropNormal         Prop = C.ORDO_PROP_NORMAL
	PropCPUPrioritized Prop = C.ORDO_PROP_CPU_PRIORITIZED
	PropCopyToDevice   Prop = C.ORDO_PROP_COPY_TO_DEVICE
	PropCopyFromDevice Prop = C.ORDO_PROP_COPY_FROM_DEVICE
	// PropAsync ops run inline on the thread that makes them ready: for short ops that only
	// start asynchronous work and Defer.
	PropAsync Prop = C.ORDO_PROP_ASYNC
)

type engineConfig struct {
	kind              Kind
	workers           int
	gpuComputeStreams int
	gpuStreamWaits    int32 // 0: env, else default (on); 1 on; -1 off
}

// An EngineOption configures NewEngine.
type EngineOption func(*engineConfig)

// WithKind picks the engine kind (default: env ORDO_ENGINE, else KindPerDevice).
func WithKind(k Kind) EngineOption { return func(c *engineConfig) { c.kind = k } }

// WithWorkers sets the number of CPU worker threads (default: env ORDO_CPU_THREADS, else the
// number of hardware threads, at least 2).
func WithWorkers(n int) EngineOption { return func(c *engineConfig) { c.workers = n } }

// WithGPUComputeStreams sets the number of compute streams per GPU, 1 to 64 (default: env
// ORDO_GPU_STREAMS, else 4; 0 means that default). Other values make NewEngine fail with
// ErrInvalidArgument. Unused without a GPU.
func WithGPUComputeStreams(n int) EngineOption {
	return func(c *engineConfig) { c.gpuComputeStreams = n }
}

// WithGPUStreamWaits turns the early release of GPU successors on or off (default: env
// ORDO_GPU_STREAM_WAITS, else on): when on, a GPU op that depends only on GPU ops of the same
// GPU starts once their work is enqueued, its stream waiting for theirs on the device, instead
// of once their work has finished (ordo.h, gpu_stream_waits).
func WithGPUStreamWaits(on bool) EngineOption {
	return func(c *engineConfig) {
		c.gpuStreamWaits = -1
		if on {
			c.gpuStreamWaits = 1
		}
	}
}

// Engine owns worker threads and runs ops. Create it with NewEngine and Close it when done.
type Engine struct {
	p uintptr // ordo_engine*; this object holds a reference of its own until it is collected
}

// NewEngine creates an engine and starts its workers.
func NewEngine(opts ...EngineOption) (*Engine, error) {
	var cfg engineConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.workers < 0 || cfg.workers > math.MaxInt32 {
		return nil, &Error{Code: StatusInvalidArgument, Message: "NewEngine: negative worker count"}
	}
	if cfg.gpuComputeStreams < math.MinInt32 || cfg.gpuComputeStreams > math.MaxInt32 {
		return nil, &Error{Code: StatusInvalidArgument,
			Message: "NewEngine: GPU compute stream count out of range"}
	}
	r := C.ordo_go_engine_create(C.int32_t(cfg.kind), C.int32_t(cfg.workers),
		C.int32_t(cfg.gpuComputeStreams), C.int32_t(cfg.gpuStreamWaits))
	if err := check(r); err != nil {
		return nil, err
	}
	e := &Engine{p: uintptr(r.value)}
	runtime.SetFinalizer(e, (*Engine).finalize)
	return e, nil
}

// Close shuts the engine down: it waits for every op pushed so far (deferred ones included:
// their Completions must still be completed), joins the workers and returns. Later calls on the
// engine return ErrShutdown; Close itself may be called again (it then returns nil at once).
// From inside an op of this engine it returns ErrWouldDeadlock and does nothing.
func (e *Engine) Close() error {
	err := check(C.ordo_go_engine_destroy(C.uintptr_t(e.p)))
	if errors.Is(err, ErrShutdown) {
		err = nil // closed before
	}
	runtime.KeepAlive(e)
	return err
}

// Config is an engine's effective configuration: what its options, the environment and the
// defaults gave (ordo_engine_get_config).
type Config struct {
	Kind               Kind
	Workers            int  // CPU worker threads
	CPUPriorityThreads int  // KindPerDevice: workers for PropCPUPrioritized ops
	CopyThreads        int  // KindPerDevice: workers per copy direction
	MaxPending         int  // the submission window; -1: none
	GPUComputeStreams  int  // compute streams per GPU
	GPUStreamWaits     bool // early release of GPU successors
}

// Config reads the engine's effective configuration (also after Close).
func (e *Engine) Config() (Config, error) {
	var c C.ordo_engine_config
	err := check(C.ordo_go_engine_config(C.uintptr_t(e.p), &c))
	runtime.KeepAlive(e)
	if err != nil {
		return Config{}, err
	}
	return Config{
		Kind:               Kind(c.kind),
		Workers:            int(c.cpu_threads),
		CPUPriorityThreads: int(c.cpu_priority_threads),
		CopyThreads:        int(c.copy_threads),
		MaxPending:         int(c.max_pending),
		GPUComputeStreams:  int(c.gpu_compute_streams),
		GPUStreamWaits:     c.gpu_stream_waits > 0,
	}, nil
}

// finalize drops the engine's references once the Go object is unreachable, on a goroutine of
// its own: an engine never closed is drained first, which may wait for ops.
func (e *Engine) finalize() {
	p := C.uintptr_t(e.p)
	go func() {
		_ = check(C.ordo_go_engine_destroy(p))
		C.ordo_go_engine_release(p)
	}()
}

// Var stands for a piece of data that ops read or write. Create it with Engine.NewVar.
type Var struct {
	e *Engine
	h C.ordo_var
}

// NewVar creates a variable. A Var that becomes unreachable is deleted (after the ops pushed on
// it) by its finalizer; Delete does it at once.
func (e *Engine) NewVar() (*Var, error) {
	r := C.ordo_go_var_new(C.uintptr_t(e.p))
	runtime.KeepAlive(e)
	if err := check(r); err != nil {
		return nil, err
	}
	v := &Var{e: e, h: C.ordo_var(r.value)}
	runtime.SetFinalizer(v, (*Var).finalize)
	return v, nil
}

func (v *Var) finalize() { _ = check(C.ordo_go_var_delete(C.uintptr_t(v.e.p), v.h)) }

// Delete deletes v, ordered like a write: after every op pushed before it that uses v. From
// then on every use of v returns ErrInvalidHandle.
func (v *Var) Delete() error {
	err := check(C.ordo_go_var_delete(C.uintptr_t(v.e.p), v.h))
	if err == nil {
		runtime.SetFinalizer(v, nil)
	}
	runtime.KeepAlive(v)
	return err
}

// ClearError clears v's error state, ordered like a write: ops pushed before it still see the
// error, ops pushed after it run normally.
func (v *Var) ClearError() error {
	err := check(C.ordo_go_var_clear_error(C.uintptr_t(v.e.p), v.h))
	runtime.KeepAlive(v)
	return err
}

// Err returns v's error state as it is now (not ordered with pending ops: Wait first for a
// settled answer): nil, or an *Error with Code StatusOpFailed and the failing op's OpCode.
func (v *Var) Err() error {
	r := C.ordo_go_var_error(C.uintptr_t(v.e.p), v.h)
	runtime.KeepAlive(v)
	if r.status == C.ORDO_OK && r.code != 0 {
		msg := C.GoString(r.msg)
		C.free(unsafe.Pointer(r.msg))
		return &Error{Code: StatusOpFailed, OpCode: int32(r.code), Message: msg}
	}
	return check(r)
}

type pushConfig struct {
	name     []byte // NUL-terminated, or nil
	priority int32
	prop     Prop
	gpu      int  // the GPU's ordinal, when onGPU
	onGPU    bool // WithGPU was given
}

// A PushOption configures Engine.Push.
type PushOption func(*pushConfig)

// WithName names the op in error messages and traces (up to 47 bytes are kept).
func WithName(name string) PushOption {
	b := append([]byte(name), 0)
	return func(c *pushConfig) { c.name = b }
}

// WithPriority sets the op's priority: higher runs first among ready ops waiting for the same
// workers (default 0).
func WithPriority(p int32) PushOption { return func(c *pushConfig) { c.priority = p } }

// WithProp picks which workers run the op (default PropNormal).
func WithProp(p Prop) PushOption { return func(c *pushConfig) { c.prop = p } }

// WithGPU makes the op a GPU op of GPU id (0, 1, ...): its function runs with that GPU current
// and finds its CUDA stream in Exec.Info().Stream, enqueues its work there and returns; the op
// completes once that work has finished. A GPU that is not there (see DeviceCount) makes Push
// fail with ErrNoDevice and the reason; a negative id with ErrInvalidArgument.
func WithGPU(id int) PushOption { return func(c *pushConfig) { c.gpu, c.onGPU = id, true } }

func pushOptions(opts []PushOption) pushConfig {
	var cfg pushConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// DeviceCount is the number of GPUs the library can use: 0 in a build without CUDA and on a
// machine without a GPU or its driver (a push WithGPU then fails with ErrNoDevice, saying why).
func DeviceCount() int {
	var n C.int32_t
	C.ordo_device_count(&n)
	return int(n)
}

// shimGPU is the GPU for the shim: -1 for the CPU; ErrInvalidArgument (fn names the call) for a
// negative WithGPU.
func (c *pushConfig) shimGPU(fn string) (C.int32_t, error) {
	if !c.onGPU {
		return -1, nil
	}
	if c.gpu < 0 || c.gpu > math.MaxInt32 {
		return 0, &Error{Code: StatusInvalidArgument,
			Message: fmt.Sprintf("%s: WithGPU(%d): a GPU's ordinal is 0 or more", fn, c.gpu)}
	}
	return C.int32_t(c.gpu), nil
}

// cname is the name for C (pointing into c.name), or nil.
func (c *pushConfig) cname() *C.char {
	if c.name == nil {
		return nil
	}
	return (*C.char)(unsafe.Pointer(&c.name[0]))
}

// varHandles lays the handles of reads, then writes, out in one array for C: rp and wp point
// into it (nil for an empty list). A nil Var is ErrInvalidHandle (fn names the call).
func varHandles(fn string, reads, writes []*Var) (rp, wp *C.ordo_var, err error) {
	ids := make([]C.ordo_var, len(reads)+len(writes))
	for i, v := range reads {
		if v == nil {
			return nil, nil, &Error{Code: StatusInvalidHandle, Message: fn + ": nil Var in reads"}
		}
		ids[i] = v.h
	}
	for i, v := range writes {
		if v == nil {
			return nil, nil, &Error{Code: StatusInvalidHandle, Message: fn + ": nil Var in writes"}
		}
		ids[len(reads)+i] = v.h
	}
	if len(reads) > 0 {
		rp = &ids[0]
	}
	if len(writes) > 0 {
		wp = &ids[len(reads)]
	}
	return rp, wp, nil
}

// Push hands fn to the engine as an op that reads the vars in reads and writes those in writes.
// It returns at once (except for the naive engine and ready PropAsync ops, which run fn before
// Push returns). fn runs once (a push that Engine.Capture records: once per Graph.Launch), on
// an engine thread, after every op pushed before it that shares a var with it where either
// writes it. Returning a non-nil error (or panicking) fails the op: see OpError. fn may call
// Exec.Defer to complete the op later, from any goroutine. If a var the op uses is in an error
// state when its turn comes, fn is not called (the op is skipped).
func (e *Engine) Push(fn func(*Exec) error, reads, writes []*Var, opts ...PushOption) error {
	if fn == nil {
		return &Error{Code: StatusInvalidArgument, Message: "Push: nil function"}
	}
	cfg := pushOptions(opts)
	gpu, err := cfg.shimGPU("Push")
	if err != nil {
		return err
	}
	rp, wp, err := varHandles("Push", reads, writes)
	if err != nil {
		return err
	}
	h := newOpHandle(fn)
	r := C.ordo_go_push(C.uintptr_t(e.p), C.uintptr_t(h), rp, C.size_t(len(reads)), wp,
		C.size_t(len(writes)), C.int32_t(cfg.priority), C.int32_t(cfg.prop), gpu,
		cfg.cname())
	runtime.KeepAlive(e)
	runtime.KeepAlive(reads)
	runtime.KeepAlive(writes)
	if err := check(r); err != nil {
		deleteOpHandle(h) // nothing was pushed: the closure stays ours
		return err
	}
	return nil
}

const noTimeout = math.MaxUint64

func timeoutNs(d time.Duration) C.uint64_t {
	if d <= 0 {
		return 0 // a poll
	}
	return C.uint64_t(d)
}

// Wait blocks until every op pushed before the call that reads or writes v has completed. It
// returns nil, or an *Error: ErrOpFailed when v is then in an error state (Message names the
// failing op, OpCode is its code), ErrInvalidHandle, ErrShutdown, ErrWouldDeadlock (called from
// inside an op of the engine).
func (e *Engine) Wait(v *Var) error { return e.waitVar(v, noTimeout) }

// WaitTimeout is Wait giving up after d with an error that errors.Is(err, ErrTimeout) (and has
// no other effect). d <= 0 polls.
func (e *Engine) WaitTimeout(v *Var, d time.Duration) error { return e.waitVar(v, timeoutNs(d)) }

func (e *Engine) waitVar(v *Var, ns C.uint64_t) error {
	if v == nil {
		return &Error{Code: StatusInvalidHandle, Message: "Wait: nil Var"}
	}
	err := check(C.ordo_go_wait_var(C.uintptr_t(e.p), v.h, ns))
	runtime.KeepAlive(e)
	runtime.KeepAlive(v)
	return err
}

// WaitAll blocks until every op pushed to the engine before the call has completed. It returns
// an error that errors.Is(err, ErrOpFailed) if any op failed (or was skipped) since the previous
// WaitAll, with the first failure's message.
func (e *Engine) WaitAll() error { return e.waitAll(noTimeout) }

// WaitAllTimeout is WaitAll giving up after d with ErrTimeout (the failure record is then kept
// for the next WaitAll). d <= 0 polls.
func (e *Engine) WaitAllTimeout(d time.Duration) error { return e.waitAll(timeoutNs(d)) }

func (e *Engine) waitAll(ns C.uint64_t) error {
	err := check(C.ordo_go_wait_all(C.uintptr_t(e.p), ns))
	runtime.KeepAlive(e)
	return err
}

// WaitContext is Wait that gives up when ctx is done, returning ctx.Err(); the wait itself
// then finishes in the background.
func (e *Engine) WaitContext(ctx context.Context, v *Var) error {
	select {
	case err := <-e.WaitAsync(v):
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Stats are an engine's counters of ops pushed with Push.
type Stats struct {
	Workers   uint32 // worker threads running
	Pushed    uint64 // ops accepted
	Completed uint64 // ops finished: ran, failed or skipped
	Failed    uint64 // ops failed (skipped ones included)
	Skipped   uint64 // of Failed, ops not run because a var they use carried an error
	Pending   uint64 // pushed and not completed
}

// Stats reads the engine's counters (exact when the engine is idle).
func (e *Engine) Stats() (Stats, error) {
	var s C.ordo_stats
	err := check(C.ordo_go_stats(C.uintptr_t(e.p), &s))
	runtime.KeepAlive(e)
	return Stats{uint32(s.workers), uint64(s.pushed), uint64(s.completed), uint64(s.failed),
		uint64(s.skipped), uint64(s.pending)}, err
}

// Exec is a running op's context, passed to its function; valid only during that call, on its
// goroutine.
type Exec struct {
	fn       func(*Exec) error
	exec     uintptr // ordo_exec*, a token, not a pointer
	deferred bool
}

// Defer makes the running op asynchronous: it completes when the returned Completion is
// completed (from any goroutine, exactly once), not when the function returns, whose result is
// then ignored. Call it only from the op's function itself (elsewhere: ErrInvalidState).
func (x *Exec) Defer() (*Completion, error) {
	r := C.ordo_go_defer(C.uintptr_t(x.exec))
	if err := check(r); err != nil {
		return nil, err
	}
	x.deferred = true
	c := &Completion{c: C.ordo_completion(r.value)}
	runtime.SetFinalizer(c, (*Completion).abandon)
	return c, nil
}

// ExecInfo describes the running op (Exec.Info).
type ExecInfo struct {
	Name        string
	Priority    int32
	Prop        Prop
	WorkerIndex int     // the worker running it, or -1 when it runs inline on the pushing thread
	GPU         int     // the GPU of a GPU op (WithGPU), or -1 on the CPU
	Stream      uintptr // a GPU op's CUDA stream (a cudaStream_t), 0 on the CPU
}

// Info describes the running op: its name, priority and prop, the worker running it and, for a
// GPU op, its GPU and the CUDA stream to enqueue its work on. Call it only from the op's function.
func (x *Exec) Info() (ExecInfo, error) {
	var ci C.ordo_exec_info
	if err := check(C.ordo_go_exec_info(C.uintptr_t(x.exec), &ci)); err != nil {
		return ExecInfo{}, err
	}
	info := ExecInfo{Priority: int32(ci.priority), Prop: Prop(ci.prop),
		WorkerIndex: int(ci.worker_index), GPU: -1, Stream: uintptr(ci.stream)}
	if ci.name != nil {
		info.Name = C.GoString(ci.name)
	}
	if ci.device_type == C.ORDO_DEVICE_GPU {
		info.GPU = int(ci.device_id)
	}
	return info, nil
}

// Completion completes a deferred op. Complete or Fail may be called once, from any goroutine;
// later calls return ErrInvalidHandle. A Completion that is garbage collected without having
// been used fails its op (so a lost one does not hang the waiters for ever).
type Completion struct {
	c    C.ordo_completion
	used uint32
}

// Complete completes the op successfully.
func (c *Completion) Complete() error { return c.finish(0, "") }

// Fail completes the op as failed: err's code and message as for an op function's error (see
// OpError). Fail(nil) is Complete().
func (c *Completion) Fail(err error) error {
	if err == nil {
		return c.Complete()
	}
	code, msg := opFailure(err)
	return c.finish(code, msg)
}

func (c *Completion) finish(code int32, msg string) error {
	if !atomic.CompareAndSwapUint32(&c.used, 0, 1) {
		return &Error{Code: StatusInvalidHandle, Message: "ordo_complete: the completion was already used"}
	}
	runtime.SetFinalizer(c, nil)
	var cmsg *C.char
	if msg != "" {
		cmsg = C.CString(msg)
		defer C.free(unsafe.Pointer(cmsg))
	}
	return check(C.ordo_go_complete(c.c, C.int32_t(code), cmsg))
}

func (c *Completion) abandon() {
	_ = c.finish(DefaultOpCode, "the op's Completion was garbage collected without being completed")
}
