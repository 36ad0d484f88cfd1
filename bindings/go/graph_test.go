package ordo_test

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ordo "github.com/ordo-engine/ordo/bindings/go"
)

func mustCapture(t *testing.T, e *ordo.Engine, fn func() error) *ordo.Graph {
	t.Helper()
	g, err := e.Capture(fn)
	if err != nil {
		t.Fatalf("Capture: %v", err)
	}
	if g == nil {
		t.Fatal("Capture returned no graph")
	}
	return g
}

func mustLaunch(t *testing.T, g *ordo.Graph) {
	t.Helper()
	if err := g.Launch(); err != nil {
		t.Fatalf("Launch: %v", err)
	}
}

// A captured program runs only when launched, each launch as its pushes made again: every
// callback once per launch, in capture order on the var, ordered with ordinary pushes on it.
func TestGraphLaunchReplaysInOrder(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			v := newVar(t, e)
			var log []string
			step := func(s string) func(*ordo.Exec) error {
				return func(*ordo.Exec) error { log = append(log, s); return nil }
			}
			mustPush(t, e, step("before"), nil, vars(v))
			g := mustCapture(t, e, func() error {
				for _, s := range []string{"a", "b", "c"} {
					if err := e.Push(step(s), nil, vars(v), ordo.WithName(s)); err != nil {
						return err
					}
				}
				return nil
			})
			if err := e.Wait(v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(log, []string{"before"}) {
				t.Fatalf("after the capture: %v (the captured ops ran)", log)
			}
			const n = 5
			want := []string{"before"}
			for i := 0; i < n; i++ {
				mustLaunch(t, g)
				mustPush(t, e, step(fmt.Sprint(i)), nil, vars(v))
				want = append(want, "a", "b", "c", fmt.Sprint(i))
			}
			if err := e.Wait(v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(log, want) {
				t.Fatalf("log = %v\nwant  %v", log, want)
			}
			s, err := e.Stats()
			if err != nil || s.Completed != uint64(1+n+3*n) || s.Failed != 0 {
				t.Fatalf("Stats = %+v, %v; want %d completed", s, err, 1+n+3*n)
			}
			if err := g.Destroy(); err != nil {
				t.Fatalf("Destroy: %v", err)
			}
		})
	}
}

// Launches compose with pushes through vars: a graph that reads one var and writes another sees
// what the ops pushed before the launch wrote, and ops pushed after it see what it wrote.
func TestGraphComposesThroughVars(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			in, out := newVar(t, e), newVar(t, e)
			x, y := 0, 0
			g := mustCapture(t, e, func() error {
				// out = 2 * in + 1, in two steps on out
				if err := e.Push(func(*ordo.Exec) error { time.Sleep(time.Millisecond); y = 2 * x; return nil },
					vars(in), vars(out)); err != nil {
					return err
				}
				return e.Push(func(*ordo.Exec) error { y++; return nil }, nil, vars(out))
			})
			defer g.Destroy()
			var seen []int
			for i := 1; i <= 4; i++ {
				i := i
				mustPush(t, e, func(*ordo.Exec) error { x = i; return nil }, nil, vars(in))
				mustLaunch(t, g)
				mustPush(t, e, func(*ordo.Exec) error { seen = append(seen, y); return nil }, vars(out), nil)
			}
			if err := e.WaitAll(); err != nil {
				t.Fatal(err)
			}
			if want := []int{3, 5, 7, 9}; !reflect.DeepEqual(seen, want) {
				t.Fatalf("seen %v, want %v", seen, want)
			}
		})
	}
}

// The captured functions live until Destroy: launches neither free them (a one-shot op's
// function is let go when it has run) nor keep them after Destroy, which lets each go once.
func TestGraphReleasesItsFunctionsOnceAtDestroy(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind))
			v := newVar(t, e)
			if err := e.WaitAll(); err != nil {
				t.Fatal(err)
			}
			before := ordo.LiveOpHandles()
			var runs int32
			count := func(*ordo.Exec) error { atomic.AddInt32(&runs, 1); return nil }
			g := mustCapture(t, e, func() error {
				for i := 0; i < 3; i++ {
					if err := e.Push(count, nil, vars(v)); err != nil {
						return err
					}
				}
				return e.Push(count, vars(v), nil)
			})
			if got := ordo.LiveOpHandles() - before; got != 4 {
				t.Fatalf("%d functions held after the capture, want 4", got)
			}
			for i := 0; i < 10; i++ {
				mustLaunch(t, g)
			}
			mustPush(t, e, count, nil, vars(v)) // a one-shot op beside them
			if err := e.WaitAll(); err != nil {
				t.Fatal(err)
			}
			if got := atomic.LoadInt32(&runs); got != 41 {
				t.Fatalf("%d runs, want 41", got)
			}
			if got := ordo.LiveOpHandles() - before; got != 4 {
				t.Fatalf("%d functions held after the launches, want 4", got)
			}
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
			if got := ordo.LiveOpHandles() - before; got != 0 {
				t.Fatalf("%d functions held after Destroy, want 0", got)
			}
			if err := g.Destroy(); !errors.Is(err, ordo.ErrInvalidHandle) {
				t.Fatalf("a second Destroy = %v, want ErrInvalidHandle", err)
			}
			if err := g.Launch(); !errors.Is(err, ordo.ErrInvalidHandle) {
				t.Fatalf("Launch after Destroy = %v, want ErrInvalidHandle", err)
			}
			if got := ordo.LiveOpHandles() - before; got != 0 || atomic.LoadInt32(&runs) != 41 {
				t.Fatalf("after the refused calls: %d functions held, %d runs", got, runs)
			}
		})
	}
}

// A capture whose function returns an error or panics records nothing that ever runs, lets go
// of what it recorded, and leaves the engine usable (the capture is over: waits work again).
func TestCaptureThatFailsDropsItsRecording(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind))
			v := newVar(t, e)
			before := ordo.LiveOpHandles()
			var ran int32
			mark := func(*ordo.Exec) error { atomic.AddInt32(&ran, 1); return nil }
			stop := errors.New("stop")

			g, err := e.Capture(func() error {
				if err := e.Push(mark, nil, vars(v)); err != nil {
					return err
				}
				return fmt.Errorf("capture: %w", stop)
			})
			if g != nil || !errors.Is(err, stop) {
				t.Fatalf("Capture = %v, %v; want nil and the function's error", g, err)
			}

			func() {
				defer func() {
					if r := recover(); r != "kaboom" {
						t.Fatalf("recovered %v, want the function's panic", r)
					}
				}()
				_, _ = e.Capture(func() error {
					if err := e.Push(mark, nil, vars(v)); err != nil {
						return err
					}
					panic("kaboom")
				})
				t.Fatal("Capture returned after its function panicked")
			}()

			if got := ordo.LiveOpHandles() - before; got != 0 {
				t.Fatalf("%d functions held after the failed captures, want 0", got)
			}
			// The engine works as before, and this thread captures nothing any more.
			mustPush(t, e, func(*ordo.Exec) error { atomic.AddInt32(&ran, 10); return nil }, nil, vars(v))
			if err := e.Wait(v); err != nil {
				t.Fatalf("Wait after the failed captures: %v", err)
			}
			if got := atomic.LoadInt32(&ran); got != 10 {
				t.Fatalf("ran = %d, want 10 (only the op pushed after the captures)", got)
			}
			g = mustCapture(t, e, func() error { return e.Push(mark, nil, vars(v)) })
			mustLaunch(t, g)
			if err := e.Wait(v); err != nil || atomic.LoadInt32(&ran) != 11 {
				t.Fatalf("a later capture: Wait = %v, ran = %d", err, ran)
			}
			if err := g.Destroy(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Inside a capture, the calls that cannot be recorded are refused with ErrInvalidState (the
// library's message), and change nothing: the capture goes on.
func TestCaptureMisuse(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind))
			other := newEngine(t, ordo.WithKind(k.kind))
			v := newVar(t, e)
			ran := 0
			done := mustCapture(t, e, func() error { return nil }) // an empty graph
			defer done.Destroy()
			refused := map[string]error{}
			g := mustCapture(t, e, func() error {
				refused["Wait"] = e.Wait(v)
				refused["WaitTimeout"] = e.WaitTimeout(v, time.Second)
				refused["WaitAll"] = e.WaitAll()
				refused["WaitAsync"] = <-e.WaitAsync(v)
				refused["ClearError"] = v.ClearError()
				refused["Delete"] = v.Delete()
				refused["Close"] = e.Close()
				refused["Launch"] = done.Launch()
				_, refused["nested Capture"] = e.Capture(func() error { return nil })
				_, refused["Capture of another engine"] = other.Capture(func() error { return nil })
				return e.Push(func(*ordo.Exec) error { ran++; return nil }, nil, vars(v))
			})
			defer g.Destroy()
			for call, err := range refused {
				var oe *ordo.Error
				if !errors.Is(err, ordo.ErrInvalidState) || !errors.As(err, &oe) ||
					!strings.HasPrefix(oe.Message, "ordo_") {
					t.Errorf("%s inside a capture = %v, want ErrInvalidState with the library's message", call, err)
				}
			}
			// Nothing happened: v still works, the engine is open, the capture recorded the push.
			mustLaunch(t, g)
			if err := e.Wait(v); err != nil || ran != 1 {
				t.Fatalf("after the capture: Wait = %v, ran = %d", err, ran)
			}
			if _, err := e.Capture(nil); !errors.Is(err, ordo.ErrInvalidArgument) {
				t.Fatalf("Capture(nil) = %v", err)
			}
		})
	}
}

// Only the capturing goroutine's pushes are recorded: another goroutine's push during the
// capture runs at once. A capture from inside an op is refused.
func TestCaptureIsPerGoroutine(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(2))
	v, w := newVar(t, e), newVar(t, e)
	var log []string
	g := mustCapture(t, e, func() error {
		done := make(chan error)
		go func() {
			err := e.Push(func(*ordo.Exec) error { log = append(log, "other goroutine"); return nil }, nil, vars(w))
			if err == nil {
				err = e.Wait(w)
			}
			done <- err
		}()
		if err := <-done; err != nil {
			return err
		}
		return e.Push(func(*ordo.Exec) error { log = append(log, "captured"); return nil }, nil, vars(w))
	})
	defer g.Destroy()
	if !reflect.DeepEqual(log, []string{"other goroutine"}) {
		t.Fatalf("log after the capture = %v", log)
	}
	mustLaunch(t, g)
	if err := e.Wait(w); err != nil || !reflect.DeepEqual(log, []string{"other goroutine", "captured"}) {
		t.Fatalf("after a launch: %v, log %v", err, log)
	}
	var inside error
	mustPush(t, e, func(*ordo.Exec) error {
		_, inside = e.Capture(func() error { return nil })
		return nil
	}, nil, vars(v))
	if err := e.Wait(v); err != nil || !errors.Is(inside, ordo.ErrInvalidState) {
		t.Fatalf("Capture inside an op = %v (Wait %v), want ErrInvalidState", inside, err)
	}
}

// Destroy is refused while a launch's ops are in flight (here a deferred op not yet completed),
// and changes nothing; once they finish it works. Launch after Close is ErrShutdown, Destroy
// after Close works.
func TestGraphDestroyWhileInFlight(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e, err := ordo.NewEngine(ordo.WithKind(k.kind), ordo.WithWorkers(2))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			v := newVar(t, e)
			before := ordo.LiveOpHandles()
			completions := make(chan *ordo.Completion, 1)
			after := 0
			g := mustCapture(t, e, func() error {
				if err := e.Push(func(x *ordo.Exec) error {
					c, err := x.Defer()
					if err == nil {
						completions <- c
					}
					return err
				}, nil, vars(v), ordo.WithName("gate")); err != nil {
					return err
				}
				return e.Push(func(*ordo.Exec) error { after++; return nil }, nil, vars(v))
			})
			mustLaunch(t, g)
			var c *ordo.Completion
			select {
			case c = <-completions:
			case <-time.After(patience):
				t.Fatal("the launched gate op never ran")
			}
			err = g.Destroy()
			var oe *ordo.Error
			if !errors.Is(err, ordo.ErrInvalidState) || !errors.As(err, &oe) || oe.Message == "" {
				t.Fatalf("Destroy in flight = %v, want ErrInvalidState with a message", err)
			}
			if got := ordo.LiveOpHandles() - before; got != 2 {
				t.Fatalf("%d functions held after the refused Destroy, want 2", got)
			}
			if err := c.Complete(); err != nil {
				t.Fatal(err)
			}
			if err := e.Wait(v); err != nil || after != 1 {
				t.Fatalf("Wait = %v, after = %d", err, after)
			}
			mustLaunch(t, g) // the graph is intact
			c = <-completions
			if err := c.Complete(); err != nil {
				t.Fatal(err)
			}
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if after != 2 {
				t.Fatalf("after = %d, want 2", after)
			}
			if err := g.Launch(); !errors.Is(err, ordo.ErrShutdown) {
				t.Fatalf("Launch after Close = %v, want ErrShutdown", err)
			}
			if _, err := e.Capture(func() error { return nil }); !errors.Is(err, ordo.ErrShutdown) {
				t.Fatalf("Capture after Close = %v, want ErrShutdown", err)
			}
			if err := g.Destroy(); err != nil {
				t.Fatalf("Destroy after Close = %v", err)
			}
			if got := ordo.LiveOpHandles() - before; got != 0 {
				t.Fatalf("%d functions held after Destroy, want 0", got)
			}
		})
	}
}

// A launched op that fails fails as a pushed one does, with its message, each launch; readers
// of one graph launched from several goroutines at once each run with an Exec of their own.
func TestGraphFailuresAndConcurrentLaunches(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(4))
	v, w := newVar(t, e), newVar(t, e)
	g := mustCapture(t, e, func() error {
		return e.Push(func(*ordo.Exec) error { return &ordo.OpError{Code: 17, Message: "replayed failure"} },
			nil, vars(v), ordo.WithName("boom"))
	})
	defer g.Destroy()
	for i := 0; i < 2; i++ {
		mustLaunch(t, g)
		err := e.Wait(v)
		var oe *ordo.Error
		if !errors.As(err, &oe) || !errors.Is(err, ordo.ErrOpFailed) || oe.OpCode != 17 ||
			!strings.Contains(oe.Message, "'boom'") || !strings.Contains(oe.Message, "replayed failure") {
			t.Fatalf("launch %d: Wait = %v, want boom's failure", i, err)
		}
		if err := v.ClearError(); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.WaitAll(); !errors.Is(err, ordo.ErrOpFailed) {
		t.Fatalf("WaitAll = %v", err)
	}

	var runs, deferred int32
	readers := mustCapture(t, e, func() error {
		for i := 0; i < 4; i++ {
			err := e.Push(func(x *ordo.Exec) error {
				atomic.AddInt32(&runs, 1)
				c, err := x.Defer() // a fresh Exec per run: each run may defer once
				if err != nil {
					return err
				}
				atomic.AddInt32(&deferred, 1)
				return c.Complete()
			}, vars(w), nil)
			if err != nil {
				return err
			}
		}
		return nil
	})
	defer readers.Destroy()
	var wg sync.WaitGroup
	for p := 0; p < 4; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if err := readers.Launch(); err != nil {
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
	if runs != 4*4*50 || deferred != runs {
		t.Fatalf("%d runs, %d deferred; want %d each", runs, deferred, 4*4*50)
	}
}

// A graph dropped without Destroy is destroyed by its finalizer, which lets its functions go.
func TestDroppedGraphIsFinalized(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled))
	v := newVar(t, e)
	before := ordo.LiveOpHandles()
	func() {
		g := mustCapture(t, e, func() error { return e.Push(func(*ordo.Exec) error { return nil }, nil, vars(v)) })
		mustLaunch(t, g)
	}()
	if err := e.WaitAll(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(patience)
	for ordo.LiveOpHandles() != before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := ordo.LiveOpHandles() - before; got != 0 {
		t.Fatalf("%d functions held after the graph was collected, want 0", got)
	}
}

// An engine closed by another goroutine while a capture is open: the capture ends with
// ErrShutdown, and what it recorded never runs and is let go.
func TestCaptureOfAnEngineClosedMeanwhile(t *testing.T) {
	e, err := ordo.NewEngine(ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	v := newVar(t, e)
	before := ordo.LiveOpHandles()
	ran := false
	g, err := e.Capture(func() error {
		if err := e.Push(func(*ordo.Exec) error { ran = true; return nil }, nil, vars(v)); err != nil {
			return err
		}
		closed := make(chan error)
		go func() { closed <- e.Close() }()
		return <-closed
	})
	if g != nil || !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("Capture = %v, %v; want ErrShutdown", g, err)
	}
	if got := ordo.LiveOpHandles() - before; got != 0 || ran {
		t.Fatalf("%d functions held, ran %v; want none held, nothing run", got, ran)
	}
}
