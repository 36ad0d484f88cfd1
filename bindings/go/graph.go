package ordo

// #include "shim.h"
import "C"

import (
	"errors"
	"runtime"
)

// Graph is a captured sequence of pushes (Engine.Capture). Launch pushes them again, in capture
// order, as if they were pushed again at that moment: the same functions, vars, names,
// priorities and props, ordered against every other push and wait through the vars; failures and
// skips as for pushed ops. The captured functions stay alive until Destroy.
//
// Destroy a Graph when done with it, after its launched ops have finished (Wait, WaitAll or
// Close first: Destroy returns ErrInvalidState while ops of a launch are in flight, and does
// nothing). A Graph that becomes unreachable undestroyed is destroyed by its finalizer, on a
// goroutine of its own; while ops of a launch are still in flight then, it tries again after a
// later garbage collection.
type Graph struct {
	e *Engine // keeps the Go engine (and its finalizer) behind every launch
	p uintptr // ordo_graph*: a handle with a generation, never reused, so safe after destroy
}

// Capture records the ops that fn pushes to e into a Graph instead of running them, and returns
// the Graph. Only pushes made by fn's own goroutine are recorded (Capture locks it to its OS
// thread for the call: ordo captures per thread); pushes from other goroutines, to other
// engines, or from inside ops run as usual. While fn runs, these calls on e from its goroutine
// return ErrInvalidState and do nothing: Wait, WaitTimeout, WaitAll, WaitAllTimeout, WaitAsync,
// WaitContext, Var.Delete, Var.ClearError, Close, Graph.Launch, and a nested Capture (of any
// engine). A push that fails during the capture returns its error as it would outside one, and
// records nothing.
//
// If fn returns an error, Capture drops what it recorded (the captured functions are let go, none
// of them ran) and returns that error; if fn panics, it drops the recording and the panic goes
// on. Capture itself fails with ErrInvalidState from inside an op of e, ErrShutdown after Close.
func (e *Engine) Capture(fn func() error) (*Graph, error) {
	if fn == nil {
		return nil, &Error{Code: StatusInvalidArgument, Message: "Capture: nil function"}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := check(C.ordo_go_begin_capture(C.uintptr_t(e.p))); err != nil {
		runtime.KeepAlive(e)
		return nil, err
	}
	open := true
	defer func() {
		if open { // fn panicked (or called runtime.Goexit): the capture must still end here
			e.dropCapture()
		}
	}()
	ferr := fn()
	open = false
	r := C.ordo_go_end_capture(C.uintptr_t(e.p))
	runtime.KeepAlive(e)
	if err := check(r); err != nil {
		if ferr != nil {
			return nil, ferr
		}
		return nil, err // the recorded ops were dropped (their functions let go)
	}
	if ferr != nil {
		_ = check(C.ordo_go_graph_destroy(C.uintptr_t(r.value))) // never launched: not in flight
		return nil, ferr
	}
	g := &Graph{e: e, p: uintptr(r.value)}
	runtime.SetFinalizer(g, (*Graph).finalize)
	return g, nil
}

// dropCapture ends this thread's capture of e and destroys what it recorded.
func (e *Engine) dropCapture() {
	r := C.ordo_go_end_capture(C.uintptr_t(e.p))
	runtime.KeepAlive(e)
	if check(r) == nil {
		_ = check(C.ordo_go_graph_destroy(C.uintptr_t(r.value)))
	}
}

// Launch pushes the captured ops again, in capture order. It returns at once, like Push (the
// naive engine and ready PropAsync ops run inside it). Any goroutine may launch, also from inside
// an op, and several at once (their ops may interleave, each ordered as one push). Errors:
// ErrInvalidHandle after Destroy, or when a var the graph uses was deleted (the ops before the
// first one that uses it were pushed; the message says how many); ErrShutdown after Close;
// ErrInvalidState inside a Capture of the graph's engine.
func (g *Graph) Launch() error {
	err := check(C.ordo_go_graph_launch(C.uintptr_t(g.p)))
	runtime.KeepAlive(g)
	return err
}

// Destroy destroys the graph and lets go of its captured functions. It returns ErrInvalidState,
// and does nothing, while a launch is in flight (being pushed by another goroutine, or its ops
// not yet finished: wait for them first); ErrInvalidHandle when the graph was destroyed before.
// It works after the engine's Close.
func (g *Graph) Destroy() error {
	err := check(C.ordo_go_graph_destroy(C.uintptr_t(g.p)))
	if err == nil {
		runtime.SetFinalizer(g, nil)
	}
	runtime.KeepAlive(g)
	return err
}

// finalize destroys an unreachable graph on a goroutine of its own (destroy calls into Go for
// each captured function); refused because a launch is still in flight, it tries again at a
// later collection.
func (g *Graph) finalize() {
	go func() {
		err := check(C.ordo_go_graph_destroy(C.uintptr_t(g.p)))
		if errors.Is(err, ErrInvalidState) {
			runtime.SetFinalizer(g, (*Graph).finalize)
		}
	}()
}
