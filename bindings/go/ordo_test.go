package ordo_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ordo "github.com/ordo-engine/ordo/bindings/go"
)

// A limit for things that must happen; far above their usual time, so that a slow, shared
// machine does not fail the suite, while a hang still fails it.
const patience = 20 * time.Second

func newEngine(t *testing.T, opts ...ordo.EngineOption) *ordo.Engine {
	t.Helper()
	e, err := ordo.NewEngine(opts...)
	if err != nil {
		t.Fatalf("NewEngine: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

func newVar(t *testing.T, e *ordo.Engine) *ordo.Var {
	t.Helper()
	v, err := e.NewVar()
	if err != nil {
		t.Fatalf("NewVar: %v", err)
	}
	return v
}

func vars(vs ...*ordo.Var) []*ordo.Var { return vs }

func mustPush(t *testing.T, e *ordo.Engine, fn func(*ordo.Exec) error, reads, writes []*ordo.Var,
	opts ...ordo.PushOption) {
	t.Helper()
	if err := e.Push(fn, reads, writes, opts...); err != nil {
		t.Fatalf("Push: %v", err)
	}
}

var kinds = []struct {
	name string
	kind ordo.Kind
}{{"naive", ordo.KindNaive}, {"pooled", ordo.KindPooled}, {"per_device", ordo.KindPerDevice}}

// Scenario 1: writes on one var run in push order.
func TestWritesRunInPushOrder(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			v := newVar(t, e)
			const n = 1000
			var got []int
			for i := 0; i < n; i++ {
				i := i
				mustPush(t, e, func(*ordo.Exec) error { got = append(got, i); return nil }, nil, vars(v))
			}
			if err := e.Wait(v); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if len(got) != n {
				t.Fatalf("%d ops ran, want %d", len(got), n)
			}
			for i, x := range got {
				if x != i {
					t.Fatalf("op %d ran in position %d", x, i)
				}
			}
			s, err := e.Stats()
			if err != nil || s.Pushed != n || s.Completed != n || s.Failed != 0 {
				t.Fatalf("Stats = %+v, %v", s, err)
			}
		})
	}
}

// Scenario 2: two readers of one var run at the same time: each waits for the other to start.
func TestReadersOverlap(t *testing.T) {
	e := newEngine(t, ordo.WithWorkers(2))
	v := newVar(t, e)
	var wg sync.WaitGroup
	wg.Add(2)
	both := make(chan struct{})
	go func() { wg.Wait(); close(both) }()
	reader := func(*ordo.Exec) error {
		wg.Done()
		select {
		case <-both:
			return nil
		case <-time.After(patience):
			return errors.New("the other reader never started")
		}
	}
	mustPush(t, e, reader, vars(v), nil)
	mustPush(t, e, reader, vars(v), nil)
	if err := e.Wait(v); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// A writer after them waits for both readers.
	x := 0
	mustPush(t, e, func(*ordo.Exec) error { x = 1; return nil }, nil, vars(v))
	if err := e.Wait(v); err != nil || x != 1 {
		t.Fatalf("Wait: %v, x = %d", err, x)
	}
}

// Scenario 3: a failing op's error skips the ops that depend on it and comes back from the waits
// as an *Error that errors.Is ErrOpFailed, with the op's code and message.
func TestFailureSkipsDependents(t *testing.T) {
	cases := []struct {
		name     string
		fn       func(*ordo.Exec) error
		code     int32
		contains string
	}{
		{"OpError", func(*ordo.Exec) error { return &ordo.OpError{Code: 42, Message: "disk on fire"} }, 42, "disk on fire"},
		{"plain error", func(*ordo.Exec) error { return fmt.Errorf("wrapped: %w", os.ErrNotExist) }, ordo.DefaultOpCode, "wrapped: file does not exist"},
		{"panic", func(*ordo.Exec) error { panic("kaboom") }, ordo.DefaultOpCode, "panic: kaboom"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEngine(t)
			a, b := newVar(t, e), newVar(t, e)
			mustPush(t, e, c.fn, nil, vars(a), ordo.WithName("producer"))
			var ran int32
			mustPush(t, e, func(*ordo.Exec) error { atomic.AddInt32(&ran, 1); return nil }, vars(a), vars(b),
				ordo.WithName("consumer"))
			err := e.Wait(b)
			if !errors.Is(err, ordo.ErrOpFailed) {
				t.Fatalf("Wait(b) = %v, want ErrOpFailed", err)
			}
			var oe *ordo.Error
			if !errors.As(err, &oe) || oe.Code != ordo.StatusOpFailed || oe.OpCode != c.code {
				t.Fatalf("Wait(b) = %#v, want Code OpFailed, OpCode %d", err, c.code)
			}
			if !strings.Contains(oe.Message, "producer") || !strings.Contains(oe.Message, c.contains) {
				t.Fatalf("message %q should name the op and say %q", oe.Message, c.contains)
			}
			if errors.Is(err, ordo.ErrTimeout) {
				t.Fatal("an OpFailed error is also ErrTimeout")
			}
			if atomic.LoadInt32(&ran) != 0 {
				t.Fatal("the dependent op ran")
			}
			if err := b.Err(); !errors.Is(err, ordo.ErrOpFailed) {
				t.Fatalf("b.Err() = %v", err)
			}
			if err := e.WaitAll(); !errors.Is(err, ordo.ErrOpFailed) {
				t.Fatalf("WaitAll = %v, want ErrOpFailed", err)
			}
			if err := e.WaitAll(); err != nil {
				t.Fatalf("a second WaitAll = %v, want nil (the record is cleared)", err)
			}
			s, _ := e.Stats()
			if s.Failed != 2 || s.Skipped != 1 {
				t.Fatalf("Stats = %+v, want 2 failed, 1 skipped", s)
			}
			// Clearing the error lets later ops run.
			if err := a.ClearError(); err != nil {
				t.Fatal(err)
			}
			if err := b.ClearError(); err != nil {
				t.Fatal(err)
			}
			mustPush(t, e, func(*ordo.Exec) error { atomic.AddInt32(&ran, 1); return nil }, vars(a), vars(b))
			if err := e.Wait(b); err != nil || atomic.LoadInt32(&ran) != 1 {
				t.Fatalf("after ClearError: Wait = %v, ran = %d", err, ran)
			}
			if err := b.Err(); err != nil {
				t.Fatalf("b.Err() = %v after clear", err)
			}
		})
	}
}

// Scenario 4: a deferred op completed from another goroutine; its successors wait for the
// completion, not for the function's return.
func TestDeferredCompletedFromAnotherGoroutine(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind))
			v := newVar(t, e)
			value := 0
			mustPush(t, e, func(x *ordo.Exec) error {
				c, err := x.Defer()
				if err != nil {
					return err
				}
				go func() {
					time.Sleep(20 * time.Millisecond)
					value = 7
					if err := c.Complete(); err != nil {
						panic(err)
					}
					if err := c.Complete(); !errors.Is(err, ordo.ErrInvalidHandle) {
						panic(fmt.Sprintf("a second Complete = %v", err))
					}
				}()
				return errors.New("ignored: the op deferred")
			}, nil, vars(v))
			seen := -1
			mustPush(t, e, func(*ordo.Exec) error { seen = value; return nil }, vars(v), nil)
			if err := e.Wait(v); err != nil {
				t.Fatalf("Wait: %v", err)
			}
			if seen != 7 {
				t.Fatalf("the reader saw %d, want 7", seen)
			}
			// Fail from another goroutine.
			mustPush(t, e, func(x *ordo.Exec) error {
				c, err := x.Defer()
				if err != nil {
					return err
				}
				go c.Fail(&ordo.OpError{Code: 9, Message: "remote failure"})
				return nil
			}, nil, vars(v), ordo.WithName("remote"))
			err := e.Wait(v)
			var oe *ordo.Error
			if !errors.As(err, &oe) || !errors.Is(err, ordo.ErrOpFailed) || oe.OpCode != 9 ||
				!strings.Contains(oe.Message, "remote failure") {
				t.Fatalf("Wait = %v, want the remote failure", err)
			}
		})
	}
}

// Exec.Defer works only inside the op's own function.
func TestDeferOutsideTheOp(t *testing.T) {
	e := newEngine(t)
	v := newVar(t, e)
	kept := make(chan *ordo.Exec, 1)
	mustPush(t, e, func(x *ordo.Exec) error { kept <- x; return nil }, nil, vars(v))
	if err := e.Wait(v); err != nil {
		t.Fatal(err)
	}
	if _, err := (<-kept).Defer(); !errors.Is(err, ordo.ErrInvalidState) {
		t.Fatalf("Defer after the op = %v, want ErrInvalidState", err)
	}
	mustPush(t, e, func(x *ordo.Exec) error {
		c, err := x.Defer()
		if err != nil {
			return err
		}
		defer c.Complete()
		if _, err := x.Defer(); !errors.Is(err, ordo.ErrInvalidState) {
			return fmt.Errorf("a second Defer = %v", err)
		}
		return nil
	}, nil, vars(v))
	if err := e.Wait(v); err != nil {
		t.Fatal(err)
	}
}

// A Completion that is lost (garbage collected unused) fails its op instead of hanging waiters.
func TestLostCompletionFailsTheOp(t *testing.T) {
	e := newEngine(t)
	v := newVar(t, e)
	mustPush(t, e, func(x *ordo.Exec) error { _, err := x.Defer(); return err }, nil, vars(v))
	deadline := time.Now().Add(patience)
	for {
		runtime.GC()
		err := e.WaitTimeout(v, 10*time.Millisecond)
		if err == nil {
			t.Fatal("the op succeeded")
		}
		if errors.Is(err, ordo.ErrOpFailed) {
			if !strings.Contains(err.Error(), "garbage collected") {
				t.Fatalf("message: %v", err)
			}
			return
		}
		if !errors.Is(err, ordo.ErrTimeout) || time.Now().After(deadline) {
			t.Fatalf("WaitTimeout = %v", err)
		}
	}
}

// Scenario 5: an asynchronous wait, as a channel, and WaitContext.
func TestWaitAsync(t *testing.T) {
	e := newEngine(t)
	v := newVar(t, e)
	completions := make(chan *ordo.Completion, 1)
	mustPush(t, e, func(x *ordo.Exec) error {
		c, err := x.Defer()
		completions <- c
		return err
	}, nil, vars(v))
	c := <-completions
	ch := e.WaitAsync(v)
	select {
	case err := <-ch:
		t.Fatalf("WaitAsync delivered %v before the op completed", err)
	case <-time.After(50 * time.Millisecond):
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := e.WaitContext(ctx, v); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitContext = %v, want DeadlineExceeded", err)
	}
	if err := e.WaitTimeout(v, 10*time.Millisecond); !errors.Is(err, ordo.ErrTimeout) {
		t.Fatalf("WaitTimeout = %v, want ErrTimeout", err)
	}
	if err := e.WaitAllTimeout(0); !errors.Is(err, ordo.ErrTimeout) {
		t.Fatalf("WaitAllTimeout(0) = %v, want ErrTimeout", err)
	}
	if err := c.Complete(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("WaitAsync: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("WaitAsync never delivered")
	}
	if err := e.WaitContext(context.Background(), v); err != nil {
		t.Fatalf("WaitContext: %v", err)
	}
	// A failure arrives through the channel too, with the op's message.
	mustPush(t, e, func(*ordo.Exec) error { return errors.New("nope") }, nil, vars(v),
		ordo.WithName("failing"))
	select {
	case err := <-e.WaitAsync(v):
		var oe *ordo.Error
		if !errors.Is(err, ordo.ErrOpFailed) || !errors.As(err, &oe) || oe.OpCode != ordo.DefaultOpCode ||
			!strings.Contains(oe.Message, "'failing'") || !strings.Contains(oe.Message, "nope") {
			t.Fatalf("WaitAsync = %v, want ErrOpFailed from 'failing'", err)
		}
	case <-time.After(patience):
		t.Fatal("WaitAsync never delivered")
	}
	// Nothing pending: the result is there when WaitAsync returns; then the channel is closed.
	if err := v.ClearError(); err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(v); err != nil {
		t.Fatal(err)
	}
	ch = e.WaitAsync(v)
	select {
	case err, ok := <-ch:
		if err != nil || !ok {
			t.Fatalf("WaitAsync on a settled var = %v, %v", err, ok)
		}
	default:
		t.Fatal("WaitAsync on a settled var had no result at once")
	}
	if _, ok := <-ch; ok {
		t.Fatal("the channel was not closed")
	}
	// A wait that cannot be queued reports why on the channel.
	if err := v.Delete(); err != nil {
		t.Fatal(err)
	}
	if err := <-e.WaitAsync(v); !errors.Is(err, ordo.ErrInvalidHandle) {
		t.Fatalf("WaitAsync on a deleted var = %v", err)
	}
}

// WaitAsync from many goroutines while ops run: every channel delivers once.
func TestWaitAsyncMany(t *testing.T) {
	e := newEngine(t, ordo.WithWorkers(2))
	vs := []*ordo.Var{newVar(t, e), newVar(t, e), newVar(t, e)}
	var wg sync.WaitGroup
	var got int32
	for g := 0; g < 4; g++ {
		g := g
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				v := vs[(g+i)%len(vs)]
				if err := e.Push(func(*ordo.Exec) error { return nil }, nil, vars(v)); err != nil {
					t.Error(err)
					return
				}
				if err := <-e.WaitAsync(v); err != nil {
					t.Error(err)
					return
				}
				atomic.AddInt32(&got, 1)
			}
		}()
	}
	wg.Wait()
	if got != 800 {
		t.Fatalf("%d waits delivered, want 800", got)
	}
}

// Ops push ops; waits and Close from inside an op are refused instead of deadlocking.
func TestInsideAnOp(t *testing.T) {
	e := newEngine(t)
	v, w := newVar(t, e), newVar(t, e)
	var inner, waitErr, closeErr error
	child := false
	mustPush(t, e, func(*ordo.Exec) error {
		inner = e.Push(func(*ordo.Exec) error { child = true; return nil }, nil, vars(w))
		waitErr = e.Wait(w)
		closeErr = e.Close()
		return nil
	}, nil, vars(v))
	if err := e.Wait(v); err != nil {
		t.Fatal(err)
	}
	if err := e.Wait(w); err != nil || inner != nil || !child {
		t.Fatalf("the inner push: %v, %v, ran %v", err, inner, child)
	}
	if !errors.Is(waitErr, ordo.ErrWouldDeadlock) || !errors.Is(closeErr, ordo.ErrWouldDeadlock) {
		t.Fatalf("Wait, Close inside an op = %v, %v; want ErrWouldDeadlock", waitErr, closeErr)
	}
}

// Handles: a deleted var, a closed engine, bad arguments.
func TestHandlesAndClose(t *testing.T) {
	e, err := ordo.NewEngine(ordo.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	v := newVar(t, e)
	if err := v.Delete(); err != nil {
		t.Fatal(err)
	}
	noop := func(*ordo.Exec) error { return nil }
	err = e.Push(noop, vars(v), nil)
	var oe *ordo.Error
	if !errors.Is(err, ordo.ErrInvalidHandle) || !errors.As(err, &oe) ||
		!strings.HasPrefix(oe.Message, "ordo_opr_push") {
		t.Fatalf("Push on a deleted var = %v", err)
	}
	if err := v.Delete(); !errors.Is(err, ordo.ErrInvalidHandle) {
		t.Fatalf("a second Delete = %v", err)
	}
	if err := e.Wait(v); !errors.Is(err, ordo.ErrInvalidHandle) {
		t.Fatalf("Wait on a deleted var = %v", err)
	}
	if err := e.Push(nil, nil, nil); !errors.Is(err, ordo.ErrInvalidArgument) {
		t.Fatalf("Push(nil) = %v", err)
	}
	if err := e.Push(noop, []*ordo.Var{nil}, nil); !errors.Is(err, ordo.ErrInvalidHandle) {
		t.Fatalf("Push with a nil Var = %v", err)
	}
	if _, err := ordo.NewEngine(ordo.WithKind(99)); !errors.Is(err, ordo.ErrInvalidArgument) {
		t.Fatalf("NewEngine(kind 99) = %v", err)
	}
	w := newVar(t, e)
	ran := false
	mustPush(t, e, func(*ordo.Exec) error { time.Sleep(10 * time.Millisecond); ran = true; return nil }, nil, vars(w))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("Close returned before the pending op ran")
	}
	if err := e.Close(); err != nil {
		t.Fatalf("a second Close = %v", err)
	}
	if err := e.Push(noop, nil, vars(w)); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("Push after Close = %v", err)
	}
	if _, err := e.NewVar(); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("NewVar after Close = %v", err)
	}
	if err := e.Wait(w); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("Wait after Close = %v", err)
	}
	if err := <-e.WaitAsync(w); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("WaitAsync after Close = %v", err)
	}
	if ordo.StatusTimeout.String() != "ORDO_ERR_TIMEOUT" || ordo.Version() == "" {
		t.Fatalf("Status.String / Version: %q %q", ordo.StatusTimeout, ordo.Version())
	}
}

// The message of a failed call belongs to that call, even when goroutines move between OS
// threads between calls (the binding copies it in the same cgo call).
func TestErrorMessagesStayWithTheirCall(t *testing.T) {
	e := newEngine(t)
	dead := newVar(t, e)
	if err := dead.Delete(); err != nil {
		t.Fatal(err)
	}
	calls := []struct {
		prefix string
		call   func() error
	}{
		{"ordo_wait_for_var", func() error { return e.Wait(dead) }},
		{"ordo_var_clear_error", func() error { return dead.ClearError() }},
		{"ordo_opr_push", func() error { return e.Push(func(*ordo.Exec) error { return nil }, vars(dead), nil) }},
	}
	var wg sync.WaitGroup
	var bad int32
	for g := 0; g < 6; g++ {
		g := g
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 300; i++ {
				c := calls[(g+i)%len(calls)]
				var oe *ordo.Error
				if err := c.call(); !errors.As(err, &oe) || !strings.HasPrefix(oe.Message, c.prefix) {
					if atomic.AddInt32(&bad, 1) == 1 {
						t.Errorf("%s: got %v", c.prefix, err)
					}
				}
				runtime.Gosched()
			}
		}()
	}
	wg.Wait()
}

// Many goroutines push onto shared vars at once; every op runs once, writers of a var never
// overlap (a check of its own: -race sees every cgo call as a synchronization, see README).
func TestConcurrentPushers(t *testing.T) {
	e := newEngine(t, ordo.WithWorkers(4))
	const nvars, pushers, per = 4, 4, 300
	vs := make([]*ordo.Var, nvars)
	counts := make([]int, nvars)
	busy := make([]int32, nvars)
	for i := range vs {
		vs[i] = newVar(t, e)
	}
	var overlaps int32
	var wg sync.WaitGroup
	for p := 0; p < pushers; p++ {
		p := p
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < per; i++ {
				a, b := (p+i)%nvars, (p+2*i+1)%nvars
				mine := []int{a}
				if b != a {
					mine = append(mine, b)
				}
				err := e.Push(func(*ordo.Exec) error {
					for _, k := range mine {
						if atomic.AddInt32(&busy[k], 1) != 1 {
							atomic.AddInt32(&overlaps, 1)
						}
						counts[k]++
					}
					for _, k := range mine {
						atomic.AddInt32(&busy[k], -1)
					}
					return nil
				}, nil, vars(vs[a], vs[b]))
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := e.WaitAll(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range counts {
		total += c
	}
	s, _ := e.Stats()
	if s.Completed != pushers*per || overlaps != 0 {
		t.Fatalf("completed %d of %d, %d overlaps", s.Completed, pushers*per, overlaps)
	}
	if total == 0 {
		t.Fatal("nothing counted")
	}
}

// Scenario 6: a process that exits with work pending (ops blocked in Go functions, ops queued
// behind them, a deferred op never completed, a goroutine blocked in Wait) neither aborts nor
// hangs. The test runs itself as a subprocess.
func TestExitWithWorkPending(t *testing.T) {
	for _, mode := range []string{"os.Exit", "return from main"} {
		t.Run(mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), patience)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestExitHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "ORDO_GO_EXIT_HELPER="+mode)
			out, err := cmd.CombinedOutput()
			if ctx.Err() != nil {
				t.Fatalf("the process hung at exit:\n%s", out)
			}
			if err != nil {
				t.Fatalf("the process failed at exit: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "helper: exiting with work pending") {
				t.Fatalf("the helper did not get to its exit:\n%s", out)
			}
		})
	}
}

// TestExitHelper is TestExitWithWorkPending's subprocess; it does nothing in a normal run.
func TestExitHelper(t *testing.T) {
	mode := os.Getenv("ORDO_GO_EXIT_HELPER")
	if mode == "" {
		t.Skip("only a subprocess of TestExitWithWorkPending")
	}
	e, err := ordo.NewEngine(ordo.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := e.NewVar()
	w, _ := e.NewVar()
	block := make(chan struct{})
	started := make(chan struct{}, 2)
	for i := 0; i < 2; i++ {
		// Two readers of v, one per worker: both workers are inside Go functions at exit.
		_ = e.Push(func(*ordo.Exec) error { started <- struct{}{}; <-block; return nil }, vars(v), nil)
	}
	for i := 0; i < 100; i++ {
		_ = e.Push(func(*ordo.Exec) error { return nil }, nil, vars(v))
	}
	_ = e.Push(func(x *ordo.Exec) error { c, err := x.Defer(); keep = c; return err },
		nil, vars(w), ordo.WithProp(ordo.PropAsync))
	go func() { _ = e.Wait(v) }()
	go func() { _ = e.Wait(w) }()
	<-started
	<-started
	time.Sleep(20 * time.Millisecond)
	fmt.Println("helper: exiting with work pending")
	if mode == "os.Exit" {
		os.Exit(0)
	}
	// "return from main": the test binary's main returns after this test passes.
}

var keep *ordo.Completion

// Engines and vars dropped without Close or Delete are released by their finalizers (an engine
// still running ops is drained first) without disturbing anything else.
func TestDroppedEnginesAreFinalized(t *testing.T) {
	var ran int32
	for i := 0; i < 20; i++ {
		e, err := ordo.NewEngine(ordo.WithWorkers(1))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := e.NewVar()
		_ = e.Push(func(*ordo.Exec) error { time.Sleep(time.Millisecond); atomic.AddInt32(&ran, 1); return nil },
			nil, vars(v))
	}
	deadline := time.Now().Add(patience)
	for atomic.LoadInt32(&ran) != 20 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if ran != 20 {
		t.Fatalf("%d of 20 ops ran", ran)
	}
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}

// The GPU fields of the engine config go through to the library and come back from Config;
// out-of-range values are refused by NewEngine with the library's message.
func TestGPUConfig(t *testing.T) {
	t.Setenv("ORDO_GPU_STREAMS", "")
	t.Setenv("ORDO_GPU_STREAM_WAITS", "")
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(3), ordo.WithGPUComputeStreams(7),
				ordo.WithGPUStreamWaits(false))
			c, err := e.Config()
			if err != nil {
				t.Fatal(err)
			}
			if c.Kind != k.kind || c.Workers != 3 || c.GPUComputeStreams != 7 || c.GPUStreamWaits {
				t.Fatalf("Config = %+v, want kind %d, 3 workers, 7 streams, no stream waits", c, k.kind)
			}
			e2 := newEngine(t, ordo.WithKind(k.kind), ordo.WithGPUComputeStreams(64), ordo.WithGPUStreamWaits(true))
			if c, err := e2.Config(); err != nil || c.GPUComputeStreams != 64 || !c.GPUStreamWaits {
				t.Fatalf("Config = %+v, %v; want 64 streams, stream waits", c, err)
			}
			e3 := newEngine(t, ordo.WithKind(k.kind))
			if c, err := e3.Config(); err != nil || c.GPUComputeStreams != 4 || !c.GPUStreamWaits {
				t.Fatalf("default Config = %+v, %v; want 4 streams, stream waits", c, err)
			}
		})
	}
	t.Run("env", func(t *testing.T) {
		t.Setenv("ORDO_GPU_STREAMS", "9")
		t.Setenv("ORDO_GPU_STREAM_WAITS", "0")
		e := newEngine(t, ordo.WithKind(ordo.KindPooled))
		if c, err := e.Config(); err != nil || c.GPUComputeStreams != 9 || c.GPUStreamWaits {
			t.Fatalf("Config under env = %+v, %v; want 9 streams, no stream waits", c, err)
		}
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		if c, err := e.Config(); err != nil || c.GPUComputeStreams != 9 {
			t.Fatalf("Config after Close = %+v, %v", c, err)
		}
		e2 := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithGPUComputeStreams(2), ordo.WithGPUStreamWaits(true))
		if c, err := e2.Config(); err != nil || c.GPUComputeStreams != 2 || !c.GPUStreamWaits {
			t.Fatalf("fields over env = %+v, %v; want 2 streams, stream waits", c, err)
		}
	})
	for _, n := range []int{65, -1} {
		e, err := ordo.NewEngine(ordo.WithKind(ordo.KindPooled), ordo.WithGPUComputeStreams(n))
		var oe *ordo.Error
		if e != nil || !errors.Is(err, ordo.ErrInvalidArgument) || !errors.As(err, &oe) ||
			!strings.Contains(oe.Message, "gpu_compute_streams") {
			t.Fatalf("NewEngine(WithGPUComputeStreams(%d)) = %v, %v; want ErrInvalidArgument", n, e, err)
		}
	}
}
