package ordo_test

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ordo "github.com/ordo-engine/ordo/bindings/go"
)

// Pipelines: token flow through serial and parallel pipes, deferral as the design notes' cases
// say (pipeline.md §6, Taskflow v3.10's rules), failures and panics, pushed runs ordered
// through vars, misuse returning the library's status, and the pipe functions' handles.

func mustPipeline(t *testing.T, e *ordo.Engine, lines int, pipes ...ordo.Pipe) *ordo.Pipeline {
	t.Helper()
	p, err := e.NewPipeline(lines, pipes...)
	if err != nil {
		t.Fatalf("NewPipeline: %v", err)
	}
	t.Cleanup(func() {
		if err := p.Destroy(); err != nil && !errors.Is(err, ordo.ErrInvalidHandle) {
			t.Errorf("Destroy: %v", err)
		}
	})
	return p
}

func mustRun(t *testing.T, p *ordo.Pipeline) {
	t.Helper()
	if err := p.Run(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func numTokens(t *testing.T, p *ordo.Pipeline) uint64 {
	t.Helper()
	n, err := p.NumTokens()
	if err != nil {
		t.Fatalf("NumTokens: %v", err)
	}
	return n
}

func dropped(t *testing.T, p *ordo.Pipeline) []uint64 {
	t.Helper()
	ids, err := p.Dropped()
	if err != nil {
		t.Fatalf("Dropped: %v", err)
	}
	return ids
}

// script maps (token, num_deferrals) of a pipe-0 invocation to the targets it defers to.
type script map[[2]uint64][]uint64

// stopper is a pipe-0 function: it stops when a fresh token's id is stopAt, defers as sc says,
// and logs "token/nd@Lline" (+ " D" when it defers, " STOP" when it stops) into log if not nil.
func stopper(stopAt uint64, log *[]string, sc script) ordo.PipeFunc {
	return func(pf *ordo.Pipeflow) error {
		t, nd, line := pf.Token(), pf.NumDeferrals(), pf.Line()
		if pf.Pipe() != 0 {
			return fmt.Errorf("pipe 0's function called as pipe %d", pf.Pipe())
		}
		entry := fmt.Sprintf("%d/%d@L%d", t, nd, line)
		if t == stopAt && nd == 0 {
			if log != nil {
				*log = append(*log, entry+" STOP")
			}
			return pf.Stop()
		}
		targets := sc[[2]uint64{t, uint64(nd)}]
		for _, x := range targets {
			if err := pf.Defer(x); err != nil {
				return err
			}
		}
		if len(targets) > 0 {
			entry += " D"
		}
		if log != nil {
			*log = append(*log, entry)
		}
		return nil
	}
}

// seen is what a later pipe saw of a token.
type seen struct {
	token    uint64
	line, nd int
	pipe     int
}

// enter counts a call in busy and keeps the most seen at once in most; the result leaves.
func enter(busy, most *int32) (leave func()) {
	n := atomic.AddInt32(busy, 1)
	for {
		m := atomic.LoadInt32(most)
		if n <= m || atomic.CompareAndSwapInt32(most, m, n) {
			break
		}
	}
	return func() { atomic.AddInt32(busy, -1) }
}

// recorder is a pipe function that appends what it sees to out, under mu when mu is not nil
// (a parallel pipe), and counts how many of its calls overlap in busy (the most in most) when
// busy is not nil.
func recorder(out *[]seen, mu *sync.Mutex, busy, most *int32) ordo.PipeFunc {
	return func(pf *ordo.Pipeflow) error {
		if busy != nil {
			defer enter(busy, most)()
		}
		s := seen{token: pf.Token(), line: pf.Line(), nd: pf.NumDeferrals(), pipe: pf.Pipe()}
		if mu != nil {
			mu.Lock()
			defer mu.Unlock()
		}
		*out = append(*out, s)
		return nil
	}
}

func tokensOf(s []seen) []uint64 {
	ids := make([]uint64, len(s))
	for i, x := range s {
		ids[i] = x.token
	}
	return ids
}

func linesOf(s []seen) []int {
	ls := make([]int, len(s))
	for i, x := range s {
		ls[i] = x.line
	}
	return ls
}

func upTo(n uint64) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	return ids
}

// S-P-S over N tokens on every engine kind: pipe 0 generates 0..N and stops on N; every token
// passes each later pipe once, on line token mod L; the serial pipes see them in order and never
// two at once; NumTokens is N. A rerun continues the ids; Reset starts them from 0 again.
func TestPipelineSerialParallelSerial(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			const n, lines = 200, 4
			var gen []uint64
			var busy0, most0, busy2, most2, busy1, most1 int32
			var par, ser []seen
			var parMu sync.Mutex
			source := func(pf *ordo.Pipeflow) error {
				defer enter(&busy0, &most0)()
				gen = append(gen, pf.Token())
				if pf.Token() == n {
					return pf.Stop()
				}
				return nil
			}
			middle := recorder(&par, &parMu, &busy1, &most1)
			last := recorder(&ser, nil, &busy2, &most2)
			p := mustPipeline(t, e, lines, ordo.SerialPipe(source), ordo.ParallelPipe(middle),
				ordo.Pipe{Fn: last})
			if p.Lines() != lines || p.NumPipes() != 3 || numTokens(t, p) != 0 {
				t.Fatalf("Lines %d, NumPipes %d, NumTokens %d", p.Lines(), p.NumPipes(), numTokens(t, p))
			}
			mustRun(t, p)
			if !reflect.DeepEqual(gen, upTo(n+1)) {
				t.Fatalf("pipe 0 generated %v, want 0..%d", gen, n)
			}
			if got := numTokens(t, p); got != n {
				t.Fatalf("NumTokens = %d, want %d (the id pipe 0 stopped on does not count)", got, n)
			}
			want := make([]seen, n)
			for i := range want {
				want[i] = seen{token: uint64(i), line: i % lines}
			}
			for i := range want {
				want[i].pipe = 2
			}
			if !reflect.DeepEqual(ser, want) {
				t.Fatalf("the serial pipe saw %v, want every token in order on line token mod %d", ser, lines)
			}
			sort.Slice(par, func(i, j int) bool { return par[i].token < par[j].token })
			for i := range want {
				want[i].pipe = 1
			}
			if !reflect.DeepEqual(par, want) {
				t.Fatalf("the parallel pipe saw %v, want every token once on line token mod %d", par, lines)
			}
			if most0 != 1 || most2 != 1 {
				t.Fatalf("serial pipes ran %d and %d calls at once, want 1", most0, most2)
			}
			if most1 > lines {
				t.Fatalf("the parallel pipe ran %d calls at once, more than %d lines", most1, lines)
			}
			if ids := dropped(t, p); len(ids) != 0 {
				t.Fatalf("Dropped = %v", ids)
			}

			// A rerun without reset continues the ids (stopping on n again: no token left);
			// with new pipes (ResetPipes resets) up to 2n; Reset starts from 0 again.
			gen, ser = nil, nil
			mustRun(t, p)
			if !reflect.DeepEqual(gen, []uint64{n}) || len(ser) != 0 || numTokens(t, p) != n {
				t.Fatalf("rerun: pipe 0 saw %v, the last pipe %d tokens", gen, len(ser))
			}
			ser = nil
			if err := p.ResetPipes(0, ordo.SerialPipe(stopper(2*n, nil, nil)), ordo.Pipe{Fn: middle, Parallel: true},
				ordo.SerialPipe(last)); err != nil {
				t.Fatal(err)
			}
			if numTokens(t, p) != 0 || p.Lines() != lines {
				t.Fatalf("after ResetPipes: NumTokens %d, Lines %d", numTokens(t, p), p.Lines())
			}
			mustRun(t, p)
			if !reflect.DeepEqual(tokensOf(ser), upTo(2*n)) || numTokens(t, p) != 2*n {
				t.Fatalf("after ResetPipes: the last pipe saw %v", tokensOf(ser))
			}
			ser = nil
			if err := p.Reset(); err != nil {
				t.Fatal(err)
			}
			if numTokens(t, p) != 0 {
				t.Fatal("NumTokens after Reset is not 0")
			}
			mustRun(t, p)
			if !reflect.DeepEqual(tokensOf(ser), upTo(2*n)) {
				t.Fatalf("after Reset: the last pipe saw %v", tokensOf(ser))
			}
			// Fewer lines: the tokens go round 3 lines.
			ser = nil
			if err := p.ResetPipes(3, ordo.SerialPipe(stopper(7, nil, nil)), ordo.SerialPipe(last)); err != nil {
				t.Fatal(err)
			}
			mustRun(t, p)
			if p.Lines() != 3 || p.NumPipes() != 2 ||
				!reflect.DeepEqual(linesOf(ser), []int{0, 1, 2, 0, 1, 2, 0}) {
				t.Fatalf("3 lines: Lines %d, NumPipes %d, lines used %v", p.Lines(), p.NumPipes(), linesOf(ser))
			}
		})
	}
}

// Stop on the first token: no token, the later pipes never called.
func TestPipelineStopOnTheFirstToken(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled))
	var later []seen
	p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(0, nil, nil)), ordo.SerialPipe(recorder(&later, nil, nil, nil)))
	mustRun(t, p)
	if numTokens(t, p) != 0 || len(later) != 0 {
		t.Fatalf("NumTokens %d, later pipe saw %v", numTokens(t, p), later)
	}
}

// Deferral: the cases of pipeline.md §6, whose pipe-0 traces and accepted orders are
// deterministic on every engine kind and worker count.
func TestPipelineDeferral(t *testing.T) {
	type acc struct {
		token    uint64
		line, nd int
	}
	cases := []struct {
		name      string
		lines     int
		pipes     string // S or P per later pipe
		stop      uint64
		sc        script
		log       string
		accepted  []acc // in a serial later pipe: token, line, final num_deferrals
		numTokens uint64
		dropped   []uint64
	}{
		{
			name: "T1a documentation example", lines: 4, pipes: "SS", stop: 11,
			sc: script{{2, 0}: {8}, {5, 0}: {2, 7}, {5, 1}: {9}},
			log: "0/0@L0 1/0@L1 2/0@L2 D 3/0@L2 4/0@L3 5/0@L0 D 6/0@L0 7/0@L1 8/0@L2 " +
				"2/1@L3 5/1@L0 D 9/0@L0 5/2@L1 10/0@L2 11/0@L3 STOP",
			accepted: []acc{{0, 0, 0}, {1, 1, 0}, {3, 2, 0}, {4, 3, 0}, {6, 0, 0}, {7, 1, 0},
				{8, 2, 0}, {2, 3, 1}, {9, 0, 0}, {5, 1, 2}, {10, 2, 0}},
			numTokens: 11,
		},
		{
			name: "T2b deferral to itself is retried at once", lines: 2, pipes: "S", stop: 5,
			sc:        script{{2, 0}: {2}, {2, 1}: {2}},
			log:       "0/0@L0 1/0@L1 2/0@L0 D 2/1@L0 D 2/2@L0 3/0@L1 4/0@L0 5/0@L1 STOP",
			accepted:  []acc{{0, 0, 0}, {1, 1, 0}, {2, 0, 2}, {3, 1, 0}, {4, 0, 0}},
			numTokens: 5,
		},
		{
			name: "T3 a chain reverses the order", lines: 3, pipes: "S", stop: 5,
			sc: script{{0, 0}: {1}, {1, 0}: {2}, {2, 0}: {3}, {3, 0}: {4}},
			log: "0/0@L0 D 1/0@L0 D 2/0@L0 D 3/0@L0 D 4/0@L0 " +
				"3/1@L1 2/1@L2 1/1@L0 0/1@L1 5/0@L2 STOP",
			accepted:  []acc{{4, 0, 0}, {3, 1, 1}, {2, 2, 1}, {1, 0, 1}, {0, 1, 1}},
			numTokens: 5,
		},
		{
			name: "T4a a target never generated drops the token", lines: 2, pipes: "SS", stop: 6,
			sc:        script{{1, 0}: {100}},
			log:       "0/0@L0 1/0@L1 D 2/0@L1 3/0@L0 4/0@L1 5/0@L0 6/0@L1 STOP",
			accepted:  []acc{{0, 0, 0}, {2, 1, 0}, {3, 0, 0}, {4, 1, 0}, {5, 0, 0}},
			numTokens: 6, dropped: []uint64{1},
		},
		{
			name: "T6 the ready queue keeps registration order", lines: 3, pipes: "S", stop: 7,
			sc: script{{0, 0}: {2}, {1, 0}: {4}, {0, 1}: {4}},
			log: "0/0@L0 D 1/0@L0 D 2/0@L0 0/1@L1 D 3/0@L1 4/0@L2 1/1@L0 0/2@L1 5/0@L2 " +
				"6/0@L0 7/0@L1 STOP",
			accepted: []acc{{2, 0, 0}, {3, 1, 0}, {4, 2, 0}, {1, 0, 1}, {0, 1, 2}, {5, 2, 0},
				{6, 0, 0}},
			numTokens: 7,
		},
		{
			name: "T7a a parallel pipe between serial ones", lines: 3, pipes: "PS", stop: 8,
			sc: script{{0, 0}: {1}, {2, 0}: {3}, {4, 0}: {5}, {6, 0}: {7}},
			log: "0/0@L0 D 1/0@L0 0/1@L1 2/0@L2 D 3/0@L2 2/1@L0 4/0@L1 D 5/0@L1 4/1@L2 " +
				"6/0@L0 D 7/0@L0 6/1@L1 8/0@L2 STOP",
			accepted: []acc{{1, 0, 0}, {0, 1, 1}, {3, 2, 0}, {2, 0, 1}, {5, 1, 0}, {4, 2, 1},
				{7, 0, 0}, {6, 1, 1}},
			numTokens: 8,
		},
	}
	for _, k := range kinds {
		for _, c := range cases {
			c := c
			t.Run(k.name+"/"+c.name, func(t *testing.T) {
				e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
				var log []string
				outs := make([][]seen, len(c.pipes))
				mus := make([]sync.Mutex, len(c.pipes))
				pipes := []ordo.Pipe{ordo.SerialPipe(stopper(c.stop, &log, c.sc))}
				for i, kind := range c.pipes {
					if kind == 'P' {
						pipes = append(pipes, ordo.ParallelPipe(recorder(&outs[i], &mus[i], nil, nil)))
					} else {
						pipes = append(pipes, ordo.SerialPipe(recorder(&outs[i], nil, nil, nil)))
					}
				}
				p := mustPipeline(t, e, c.lines, pipes...)
				err := p.Run()
				if c.dropped == nil {
					if err != nil {
						t.Fatalf("Run: %v", err)
					}
				} else {
					var oe *ordo.Error
					if !errors.Is(err, ordo.ErrTokensDropped) || !errors.As(err, &oe) ||
						oe.Code != ordo.StatusTokensDropped || !strings.Contains(oe.Message, "token dropped") {
						t.Fatalf("Run = %v, want ErrTokensDropped", err)
					}
				}
				if got := strings.Join(log, " "); got != c.log {
					t.Fatalf("pipe 0:\n got %s\nwant %s", got, c.log)
				}
				for i, kind := range c.pipes {
					got := make([]acc, len(outs[i]))
					for j, s := range outs[i] {
						got[j] = acc{s.token, s.line, s.nd}
					}
					want := c.accepted
					if kind == 'P' { // any order: compare sorted
						want = append([]acc(nil), want...)
						sort.Slice(got, func(a, b int) bool { return got[a].token < got[b].token })
						sort.Slice(want, func(a, b int) bool { return want[a].token < want[b].token })
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("pipe %d (%c) saw\n %v, want\n %v", i+1, kind, got, want)
					}
				}
				if got := numTokens(t, p); got != c.numTokens {
					t.Fatalf("NumTokens = %d, want %d", got, c.numTokens)
				}
				if got := dropped(t, p); !reflect.DeepEqual(got, append([]uint64{}, c.dropped...)) {
					t.Fatalf("Dropped = %v, want %v", got, c.dropped)
				}
				if c.dropped == nil {
					return
				}
				// A drop leaves the rest intact: the pipeline runs again without a reset, with
				// no replay (pipe 0 is called on the fresh stop id only, the line ring goes on).
				log = nil
				for i := range outs {
					outs[i] = nil
				}
				mustRun(t, p)
				if want := fmt.Sprintf("%d/0@L%d STOP", c.stop, len(c.accepted)%c.lines); strings.Join(log, " ") != want ||
					len(outs[0]) != 0 {
					t.Fatalf("rerun: pipe 0 %v (want %s), pipe 1 %v", log, want, outs[0])
				}
				if got := dropped(t, p); len(got) != 0 {
					t.Fatalf("Dropped after a clean rerun = %v", got)
				}
				if err := p.Reset(); err != nil {
					t.Fatal(err)
				}
				log = nil
				if err := p.Run(); !errors.Is(err, ordo.ErrTokensDropped) { // from token 0: the same drop
					t.Fatalf("Run after Reset = %v, want ErrTokensDropped", err)
				}
				if got := dropped(t, p); !reflect.DeepEqual(got, c.dropped) || strings.Join(log, " ") != c.log {
					t.Fatalf("after Reset: Dropped %v, pipe 0 %v", got, log)
				}
			})
		}
	}
}

// A pipe function's error fails the run: ErrOpFailed with its code and message, the error
// itself behind errors.Is/As; no later call for that token; the pipeline needs Reset.
func TestPipelineFailingFunction(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			var failing int32 = 1
			var mu sync.Mutex
			var worked []uint64
			bad := &ordo.OpError{Code: 7, Message: "bad token"}
			work := func(pf *ordo.Pipeflow) error {
				if pf.Token() == 3 && atomic.LoadInt32(&failing) == 1 {
					return bad
				}
				mu.Lock()
				worked = append(worked, pf.Token())
				mu.Unlock()
				return nil
			}
			var last []seen
			p := mustPipeline(t, e, 3, ordo.SerialPipe(stopper(10, nil, nil)), ordo.ParallelPipe(work),
				ordo.SerialPipe(recorder(&last, nil, nil, nil)))
			err := p.Run()
			var oe *ordo.Error
			var op *ordo.OpError
			if !errors.Is(err, ordo.ErrOpFailed) || !errors.As(err, &oe) || oe.OpCode != 7 ||
				!errors.As(err, &op) || op != bad || oe.Err != bad {
				t.Fatalf("Run = %#v, want ErrOpFailed with code 7 wrapping the function's error", err)
			}
			for _, s := range []string{"pipe 1 failed on token 3", "(code 7): bad token"} {
				if !strings.Contains(oe.Message, s) {
					t.Fatalf("Run's message %q does not say %q", oe.Message, s)
				}
			}
			if p.Err() != bad {
				t.Fatalf("Err = %v, want the function's error", p.Err())
			}
			for _, tok := range tokensOf(last) {
				if tok == 3 {
					t.Fatal("the failed token reached the last pipe")
				}
			}
			if len(worked) >= 10 {
				t.Fatalf("the run went on after the failure: %v", worked)
			}
			if err := p.Run(); !errors.Is(err, ordo.ErrInvalidState) {
				t.Fatalf("Run without Reset = %v, want ErrInvalidState", err)
			}
			if err := p.Reset(); err != nil {
				t.Fatal(err)
			}
			if p.Err() != nil || numTokens(t, p) != 0 {
				t.Fatalf("after Reset: Err %v, NumTokens %d", p.Err(), numTokens(t, p))
			}
			atomic.StoreInt32(&failing, 0)
			last = nil
			mustRun(t, p)
			if !reflect.DeepEqual(tokensOf(last), upTo(10)) {
				t.Fatalf("after Reset: %v", tokensOf(last))
			}

			// Any other error: DefaultOpCode, its text; in pipe 0.
			sentinel := errors.New("source dried up")
			if err := p.ResetPipes(0, ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
				if pf.Token() == 2 {
					return fmt.Errorf("reading frame %d: %w", pf.Token(), sentinel)
				}
				return nil
			}), ordo.SerialPipe(work)); err != nil {
				t.Fatal(err)
			}
			err = p.Run()
			if !errors.Is(err, ordo.ErrOpFailed) || !errors.Is(err, sentinel) || !errors.As(err, &oe) ||
				oe.OpCode != ordo.DefaultOpCode ||
				!strings.Contains(oe.Message, "pipe 0 failed on token 2") ||
				!strings.HasSuffix(oe.Message, "(code 3): reading frame 2: source dried up") {
				t.Fatalf("Run = %v, want pipe 0's error with code %d", err, ordo.DefaultOpCode)
			}
			if n := numTokens(t, p); n != 2 { // a failing fresh token is not counted
				t.Fatalf("NumTokens = %d, want 2", n)
			}
		})
	}
}

// A panicking pipe function fails the run as an op's panic does (DefaultOpCode, "panic: ..."),
// without unwinding through C; the pipeline needs Reset and then runs again.
func TestPipelinePanickingFunction(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			var panicking int32 = 1
			var last []seen
			p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(8, nil, nil)),
				ordo.ParallelPipe(func(pf *ordo.Pipeflow) error { return nil }),
				ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
					if pf.Token() == 5 && atomic.LoadInt32(&panicking) == 1 {
						var m map[string]int
						m["boom"]++ // a runtime error
					}
					last = append(last, seen{token: pf.Token()})
					return nil
				}))
			err := p.Run()
			var oe *ordo.Error
			var op *ordo.OpError
			if !errors.Is(err, ordo.ErrOpFailed) || !errors.As(err, &oe) || oe.OpCode != ordo.DefaultOpCode ||
				!errors.As(err, &op) || op.Code != ordo.DefaultOpCode ||
				op.Message != "panic: assignment to entry in nil map" {
				t.Fatalf("Run = %#v, want the panic as an OpError", err)
			}
			if !strings.Contains(oe.Message, "pipe 2 failed on token 5") ||
				!strings.HasSuffix(oe.Message, "(code 3): panic: assignment to entry in nil map") {
				t.Fatalf("Run's message: %q", oe.Message)
			}
			if !reflect.DeepEqual(tokensOf(last), upTo(5)) {
				t.Fatalf("the last pipe saw %v, want 0..4", tokensOf(last))
			}
			if p.Err() != op {
				t.Fatalf("Err = %v", p.Err())
			}
			if err := p.Run(); !errors.Is(err, ordo.ErrInvalidState) {
				t.Fatalf("Run without Reset = %v, want ErrInvalidState", err)
			}
			// A panic in pipe 0, with a value that is not an error.
			if err := p.ResetPipes(0, ordo.SerialPipe(func(pf *ordo.Pipeflow) error { panic(42) })); err != nil {
				t.Fatal(err)
			}
			if err := p.Run(); !errors.As(err, &op) || op.Message != "panic: 42" {
				t.Fatalf("Run = %v, want panic: 42", err)
			}
			if err := p.Reset(); err != nil {
				t.Fatal(err)
			}
			if err := p.ResetPipes(0, ordo.SerialPipe(stopper(3, nil, nil))); err != nil {
				t.Fatal(err)
			}
			mustRun(t, p)
			if numTokens(t, p) != 3 {
				t.Fatal("the pipeline did not run after the reset")
			}
		})
	}
}

// Two tokens failing at once in a parallel pipe: Run reports the one the library names, with
// that function's code and error (token t fails with code 100 + t), and Err agrees.
func TestPipelineConcurrentFailures(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(4))
	for round := 0; round < 20; round++ {
		// Tokens 0 and 1 meet, then fail together; the others succeed (a failure before both
		// arrived would make the run skip the other's call).
		var arrived int32
		both := make(chan struct{})
		var lost int32
		p := mustPipeline(t, e, 4, ordo.SerialPipe(stopper(50, nil, nil)),
			ordo.ParallelPipe(func(pf *ordo.Pipeflow) error {
				if pf.Token() >= 2 {
					return nil
				}
				if atomic.AddInt32(&arrived, 1) == 2 {
					close(both)
				}
				select {
				case <-both:
				case <-time.After(patience):
					atomic.StoreInt32(&lost, 1)
				}
				return &ordo.OpError{Code: int32(100 + pf.Token()), Message: fmt.Sprint("token ", pf.Token())}
			}))
		err := p.Run()
		if atomic.LoadInt32(&lost) != 0 {
			t.Fatal("tokens 0 and 1 never ran pipe 1 at the same time")
		}
		var oe *ordo.Error
		var op *ordo.OpError
		if !errors.As(err, &oe) || !errors.As(err, &op) {
			t.Fatalf("Run = %v", err)
		}
		var token uint64
		at := strings.Index(oe.Message, "on token ")
		if at < 0 {
			t.Fatalf("no token in %q", oe.Message)
		}
		if _, err := fmt.Sscanf(oe.Message[at:], "on token %d", &token); err != nil {
			t.Fatalf("no token in %q", oe.Message)
		}
		if token > 1 || oe.OpCode != int32(100+token) || op.Code != oe.OpCode || op.Message != fmt.Sprint("token ", token) ||
			!strings.HasSuffix(oe.Message, fmt.Sprintf("(code %d): token %d", 100+token, token)) ||
			p.Err() != op {
			t.Fatalf("round %d: Run = %v (OpCode %d, Err %v), mixed up", round, err, oe.OpCode, op)
		}
		if err := p.Destroy(); err != nil {
			t.Fatal(err)
		}
	}
}

// Stop and Defer outside pipe 0 return ErrInvalidState and change nothing: the run goes on.
func TestPipelineStopAndDeferOutsidePipe0(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled))
	var errs []error
	p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(3, nil, nil)), ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
		errs = append(errs, pf.Stop(), pf.Defer(99))
		return nil
	}))
	mustRun(t, p)
	if len(errs) != 6 || numTokens(t, p) != 3 {
		t.Fatalf("%d errors, NumTokens %d", len(errs), numTokens(t, p))
	}
	for _, err := range errs {
		if !errors.Is(err, ordo.ErrInvalidState) {
			t.Fatalf("Stop/Defer in pipe 1 = %v, want ErrInvalidState", err)
		}
	}
}

// A pushed run is ordered with ordinary ops through its vars: after the writer before it,
// before the reader after it, which sees the whole run.
func TestPipelinePushOrderedThroughAVar(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			v := newVar(t, e)
			var events []string
			var tokens []uint64
			work := func(pf *ordo.Pipeflow) error {
				if len(tokens) == 0 {
					events = append(events, "pipeline")
				}
				tokens = append(tokens, pf.Token())
				return nil
			}
			p := mustPipeline(t, e, 3, ordo.SerialPipe(stopper(20, nil, nil)), ordo.SerialPipe(work))
			mustPush(t, e, func(*ordo.Exec) error {
				time.Sleep(20 * time.Millisecond) // the run must still wait for this
				events = append(events, "producer")
				return nil
			}, nil, vars(v))
			if err := p.Push(nil, vars(v), ordo.WithName("pipeline run"), ordo.WithPriority(1)); err != nil {
				t.Fatal(err)
			}
			var consumed []uint64
			mustPush(t, e, func(*ordo.Exec) error { consumed = append([]uint64(nil), tokens...); return nil }, vars(v), nil)
			if err := e.Wait(v); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(events, []string{"producer", "pipeline"}) || !reflect.DeepEqual(consumed, upTo(20)) {
				t.Fatalf("events %v, the op after the run saw %v", events, consumed)
			}
			if numTokens(t, p) != 20 {
				t.Fatal("NumTokens after the pushed run")
			}
			// Again, reading the var: after the writer before it, before the writer after it.
			if err := p.ResetPipes(0, ordo.SerialPipe(stopper(40, nil, nil)), ordo.SerialPipe(work)); err != nil {
				t.Fatal(err)
			}
			tokens = nil
			if err := p.Push(vars(v), nil); err != nil {
				t.Fatal(err)
			}
			mustPush(t, e, func(*ordo.Exec) error { consumed = append([]uint64(nil), tokens...); return nil }, nil, vars(v))
			if err := e.Wait(v); err != nil || !reflect.DeepEqual(consumed, upTo(40)) {
				t.Fatalf("Wait = %v, the writer after the run saw %v", err, consumed)
			}
			if err := e.WaitAll(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A pushed run that fails poisons the vars it writes (the function's code; Err returns its
// error) and needs a Reset; one that drops tokens fails its op with StatusTokensDropped.
func TestPipelinePushedFailure(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(4))
			v := newVar(t, e)
			p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(4, nil, nil)), ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
				if pf.Token() == 1 {
					panic("pushed failure")
				}
				return nil
			}))
			if err := p.Push(nil, vars(v)); err != nil {
				t.Fatal(err)
			}
			skipped := true
			mustPush(t, e, func(*ordo.Exec) error { skipped = false; return nil }, nil, vars(v))
			err := e.Wait(v)
			var oe *ordo.Error
			if !errors.Is(err, ordo.ErrOpFailed) || !errors.As(err, &oe) || oe.OpCode != ordo.DefaultOpCode ||
				!strings.Contains(oe.Message, "pipe 1 failed on token 1") {
				t.Fatalf("Wait = %v, want the pushed run's failure", err)
			}
			if !skipped {
				t.Fatal("the op after the failed run ran")
			}
			var op *ordo.OpError
			if err := p.Err(); !errors.As(err, &op) || op.Message != "panic: pushed failure" {
				t.Fatalf("Err = %v, want the panic", err)
			}
			if err := p.Run(); !errors.Is(err, ordo.ErrInvalidState) {
				t.Fatalf("Run after a failed pushed run = %v, want ErrInvalidState", err)
			}
			if err := p.Reset(); err != nil {
				t.Fatal(err)
			}
			if err := v.ClearError(); err != nil {
				t.Fatal(err)
			}
			if err := p.ResetPipes(0, ordo.SerialPipe(stopper(3, nil, script{{0, 0}: {50}})),
				ordo.SerialPipe(func(*ordo.Pipeflow) error { return nil })); err != nil {
				t.Fatal(err)
			}
			if err := p.Push(nil, vars(v)); err != nil {
				t.Fatal(err)
			}
			err = e.Wait(v)
			if !errors.Is(err, ordo.ErrOpFailed) || !errors.As(err, &oe) || oe.OpCode != int32(ordo.StatusTokensDropped) {
				t.Fatalf("Wait = %v, want the dropped token's failure", err)
			}
			if got := dropped(t, p); !reflect.DeepEqual(got, []uint64{0}) || p.Err() != nil {
				t.Fatalf("Dropped = %v, Err = %v", got, p.Err())
			}
			_ = e.WaitAll() // the failures are counted
		})
	}
}

// While a pushed run waits for its vars, it is in flight: Run, Push, Reset, ResetPipes, Dropped
// and Destroy return ErrInvalidState and change nothing.
func TestPipelineInFlight(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(2))
			v := newVar(t, e)
			before := ordo.LivePipeHandles()
			held := make(chan *ordo.Completion, 1)
			mustPush(t, e, func(x *ordo.Exec) error {
				c, err := x.Defer()
				if err == nil {
					held <- c
				}
				return err
			}, nil, vars(v))
			var c *ordo.Completion
			select {
			case c = <-held:
			case <-time.After(patience):
				t.Fatal("the holding op never ran")
			}
			var ran []uint64
			p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(3, nil, nil)), ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
				ran = append(ran, pf.Token())
				return nil
			}))
			if err := p.Push(vars(v), nil); err != nil {
				t.Fatal(err)
			}
			noop := ordo.SerialPipe(func(*ordo.Pipeflow) error { return nil })
			_, droppedErr := p.Dropped()
			for name, err := range map[string]error{
				"Run": p.Run(), "Push": p.Push(nil, nil), "Reset": p.Reset(),
				"ResetPipes": p.ResetPipes(0, noop), "Dropped": droppedErr, "Destroy": p.Destroy(),
			} {
				if !errors.Is(err, ordo.ErrInvalidState) {
					t.Fatalf("%s in flight = %v, want ErrInvalidState", name, err)
				}
			}
			if got := ordo.LivePipeHandles() - before; got != 2 || len(ran) != 0 || p.NumPipes() != 2 {
				t.Fatalf("%d handles, ran %v, %d pipes", got, ran, p.NumPipes())
			}
			if err := c.Complete(); err != nil {
				t.Fatal(err)
			}
			if err := e.WaitAll(); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(ran, upTo(3)) {
				t.Fatalf("the pushed run saw %v", ran)
			}
			if err := p.Destroy(); err != nil {
				t.Fatal(err)
			}
			if got := ordo.LivePipeHandles() - before; got != 0 {
				t.Fatalf("%d handles after Destroy", got)
			}
		})
	}
}

// A Pipeflow's Stop and Defer work only inside its function, on its goroutine: afterwards,
// and from another goroutine meanwhile, ErrInvalidState. Its getters keep their values.
func TestPipelinePipeflowOutsideItsFunction(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(2))
			var kept []*ordo.Pipeflow
			var fromOther []error
			p := mustPipeline(t, e, 1, ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
				kept = append(kept, pf)
				if pf.Token() == 1 {
					done := make(chan struct{})
					go func() {
						fromOther = append(fromOther, pf.Defer(7), pf.Stop())
						close(done)
					}()
					<-done
				}
				if pf.Token() == 2 {
					return pf.Stop()
				}
				return nil
			}))
			mustRun(t, p)
			if numTokens(t, p) != 2 || len(kept) != 3 {
				t.Fatalf("NumTokens %d, %d calls: another goroutine's Stop or Defer took effect", numTokens(t, p), len(kept))
			}
			for _, err := range fromOther {
				if !errors.Is(err, ordo.ErrInvalidState) {
					t.Fatalf("Stop/Defer from another goroutine = %v, want ErrInvalidState", err)
				}
			}
			pf := kept[0]
			for _, err := range []error{pf.Stop(), pf.Defer(5)} {
				if !errors.Is(err, ordo.ErrInvalidState) {
					t.Fatalf("Stop/Defer after the function returned = %v, want ErrInvalidState", err)
				}
			}
			if pf.Token() != 0 || pf.Line() != 0 || pf.Pipe() != 0 || pf.NumDeferrals() != 0 || kept[1].Token() != 1 {
				t.Fatal("a kept Pipeflow's getters changed")
			}
		})
	}
}

// Bad arguments: ErrInvalidArgument, nothing created or changed, no function kept.
func TestPipelineBadArguments(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled))
	before := ordo.LivePipeHandles()
	noop := func(*ordo.Pipeflow) error { return nil }
	many := make([]ordo.Pipe, 17)
	for i := range many {
		many[i] = ordo.SerialPipe(noop)
	}
	for _, c := range []struct {
		name  string
		lines int
		pipes []ordo.Pipe
	}{
		{"0 lines", 0, []ordo.Pipe{ordo.SerialPipe(noop)}},
		{"-1 lines", -1, []ordo.Pipe{ordo.SerialPipe(noop)}},
		{"65,537 lines", 65537, []ordo.Pipe{ordo.SerialPipe(noop)}},
		{"a parallel first pipe", 2, []ordo.Pipe{ordo.ParallelPipe(noop), ordo.SerialPipe(noop)}},
		{"no pipes", 2, nil},
		{"a nil function", 2, []ordo.Pipe{ordo.SerialPipe(noop), ordo.SerialPipe(nil)}},
		{"more than 2^20 lines x pipes", 65536, many},
	} {
		p, err := e.NewPipeline(c.lines, c.pipes...)
		if p != nil || !errors.Is(err, ordo.ErrInvalidArgument) {
			t.Fatalf("NewPipeline with %s = %v, %v; want ErrInvalidArgument", c.name, p, err)
		}
	}
	if got := ordo.LivePipeHandles() - before; got != 0 {
		t.Fatalf("%d functions kept by refused creations", got)
	}

	var log []seen
	p := mustPipeline(t, e, 2, ordo.SerialPipe(stopper(2, nil, nil)), ordo.SerialPipe(recorder(&log, nil, nil, nil)))
	for name, err := range map[string]error{
		"a parallel first pipe": p.ResetPipes(0, ordo.ParallelPipe(noop)),
		"-1 lines":              p.ResetPipes(-1, ordo.SerialPipe(noop)),
		"no pipes":              p.ResetPipes(3),
		"a nil function":        p.ResetPipes(0, ordo.Pipe{}),
		"65,537 lines":          p.ResetPipes(65537, ordo.SerialPipe(noop)),
	} {
		if !errors.Is(err, ordo.ErrInvalidArgument) {
			t.Fatalf("ResetPipes with %s = %v, want ErrInvalidArgument", name, err)
		}
	}
	if p.NumPipes() != 2 || p.Lines() != 2 || ordo.LivePipeHandles()-before != 2 {
		t.Fatalf("refused ResetPipes changed something: %d pipes, %d lines", p.NumPipes(), p.Lines())
	}
	if err := p.Push([]*ordo.Var{nil}, nil); !errors.Is(err, ordo.ErrInvalidHandle) {
		t.Fatalf("Push with a nil Var = %v", err)
	}
	mustRun(t, p)
	if !reflect.DeepEqual(tokensOf(log), upTo(2)) {
		t.Fatalf("the old pipes did not run: %v", log)
	}
}

// After Destroy every call is ErrInvalidHandle; after Close a run is ErrShutdown and Destroy
// still works; a run from inside a pipe function of the same engine is ErrWouldDeadlock, one of
// another engine's pipeline works.
func TestPipelineLifetimes(t *testing.T) {
	e, err := ordo.NewEngine(ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(2))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	before := ordo.LivePipeHandles()
	p, err := e.NewPipeline(1, ordo.SerialPipe(stopper(1, nil, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	_, errTokens := p.NumTokens()
	_, errDropped := p.Dropped()
	for name, err := range map[string]error{
		"Run": p.Run(), "Destroy": p.Destroy(), "Push": p.Push(nil, nil), "Reset": p.Reset(),
		"ResetPipes": p.ResetPipes(0, ordo.SerialPipe(stopper(1, nil, nil))), "NumTokens": errTokens,
		"Dropped": errDropped,
	} {
		if !errors.Is(err, ordo.ErrInvalidHandle) {
			t.Fatalf("%s after Destroy = %v, want ErrInvalidHandle", name, err)
		}
	}
	if got := ordo.LivePipeHandles() - before; got != 0 {
		t.Fatalf("%d functions held after Destroy", got)
	}

	other := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(2))
	inner, err := e.NewPipeline(1, ordo.SerialPipe(stopper(2, nil, nil)))
	if err != nil {
		t.Fatal(err)
	}
	var otherTokens []seen
	foreign := mustPipeline(t, other, 1, ordo.SerialPipe(stopper(2, nil, nil)), ordo.SerialPipe(recorder(&otherTokens, nil, nil, nil)))
	var innerErr, foreignErr error
	outer, err := e.NewPipeline(1, ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
		innerErr = inner.Run()
		foreignErr = foreign.Run()
		return pf.Stop()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := outer.Run(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(innerErr, ordo.ErrWouldDeadlock) || foreignErr != nil || len(otherTokens) != 2 {
		t.Fatalf("inside a pipe function: own engine %v, other engine %v (%d tokens)", innerErr, foreignErr, len(otherTokens))
	}

	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := inner.Run(); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("Run after Close = %v, want ErrShutdown", err)
	}
	if err := inner.Push(nil, nil); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("Push after Close = %v, want ErrShutdown", err)
	}
	if _, err := e.NewPipeline(1, ordo.SerialPipe(stopper(1, nil, nil))); !errors.Is(err, ordo.ErrShutdown) {
		t.Fatalf("NewPipeline after Close = %v, want ErrShutdown", err)
	}
	for _, q := range []*ordo.Pipeline{inner, outer, foreign} {
		if err := q.Destroy(); err != nil {
			t.Fatalf("Destroy after Close = %v", err)
		}
	}
	if got := ordo.LivePipeHandles() - before; got != 0 {
		t.Fatalf("%d functions held after every Destroy", got)
	}
}

// The pipe functions are held (one handle per pipe, however many calls) until ResetPipes
// replaces them or Destroy; a pipeline dropped undestroyed lets them go when it is collected.
func TestPipelineHandles(t *testing.T) {
	e := newEngine(t, ordo.WithKind(ordo.KindPooled), ordo.WithWorkers(4))
	before := ordo.LivePipeHandles()
	var calls int64
	count := func(*ordo.Pipeflow) error { atomic.AddInt64(&calls, 1); return nil }
	p, err := e.NewPipeline(4, ordo.SerialPipe(stopper(500, nil, nil)), ordo.ParallelPipe(count), ordo.SerialPipe(count))
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC() // the functions are referenced by the pipeline only
	for i := 0; i < 3; i++ {
		mustRun(t, p)
		if err := p.Reset(); err != nil {
			t.Fatal(err)
		}
	}
	if got := ordo.LivePipeHandles() - before; got != 3 || atomic.LoadInt64(&calls) != 3000 {
		t.Fatalf("%d functions held after 3 runs, %d calls; want 3, 3000", got, calls)
	}
	if err := p.ResetPipes(0, ordo.SerialPipe(stopper(2, nil, nil))); err != nil {
		t.Fatal(err)
	}
	if got := ordo.LivePipeHandles() - before; got != 1 {
		t.Fatalf("%d functions held after ResetPipes to one pipe, want 1", got)
	}
	mustRun(t, p)
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if got := ordo.LivePipeHandles() - before; got != 0 {
		t.Fatalf("%d functions held after Destroy", got)
	}

	func() {
		q, err := e.NewPipeline(2, ordo.SerialPipe(stopper(3, nil, nil)), ordo.SerialPipe(count))
		if err != nil {
			t.Fatal(err)
		}
		mustRun(t, q)
	}()
	deadline := time.Now().Add(patience)
	for ordo.LivePipeHandles() != before && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	if got := ordo.LivePipeHandles() - before; got != 0 {
		t.Fatalf("%d functions held after the pipeline was collected", got)
	}
}
