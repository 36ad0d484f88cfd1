package ordo_test

import (
	"errors"
	"strings"
	"testing"

	ordo "github.com/ordo-engine/ordo/bindings/go"
)

// An op sees its name, priority and prop through Exec.Info, and whether it runs on a worker or
// inline (the naive engine, PropAsync); a CPU op has no GPU and no stream.
func TestExecInfo(t *testing.T) {
	props := []ordo.Prop{ordo.PropNormal, ordo.PropCPUPrioritized, ordo.PropCopyToDevice,
		ordo.PropCopyFromDevice, ordo.PropAsync}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := newEngine(t, ordo.WithKind(k.kind), ordo.WithWorkers(2))
			for _, p := range props {
				var got ordo.ExecInfo
				v, _ := e.NewVar()
				err := e.Push(func(x *ordo.Exec) error {
					var err error
					got, err = x.Info()
					return err
				}, nil, []*ordo.Var{v}, ordo.WithName("probe"), ordo.WithPriority(3), ordo.WithProp(p))
				if err != nil {
					t.Fatalf("Push: %v", err)
				}
				if err := e.Wait(v); err != nil {
					t.Fatalf("Wait: %v", err)
				}
				if got.Name != "probe" || got.Priority != 3 || got.Prop != p || got.GPU != -1 ||
					got.Stream != 0 {
					t.Fatalf("prop %d: Info() = %+v", p, got)
				}
				inline := k.kind == ordo.KindNaive || p == ordo.PropAsync
				if inline != (got.WorkerIndex == -1) {
					t.Fatalf("prop %d: WorkerIndex %d (inline: %v)", p, got.WorkerIndex, inline)
				}
			}
		})
	}
}

// A GPU that is not there: ErrNoDevice with the reason, and nothing runs; a negative GPU:
// ErrInvalidArgument. GPU DeviceCount() is one past the last on any machine.
func TestPushWithGPUErrors(t *testing.T) {
	n := ordo.DeviceCount()
	if n < 0 || n > 16 {
		t.Fatalf("DeviceCount() = %d", n)
	}
	e := newEngine(t, ordo.WithWorkers(2))
	ran := false
	err := e.Push(func(*ordo.Exec) error { ran = true; return nil }, nil, nil, ordo.WithGPU(n))
	if !errors.Is(err, ordo.ErrNoDevice) || !strings.Contains(err.Error(), "requested") {
		t.Fatalf("WithGPU(%d): %v, want ErrNoDevice with the reason", n, err)
	}
	t.Logf("WithGPU(%d): %v", n, err)
	err = e.Push(func(*ordo.Exec) error { ran = true; return nil }, nil, nil, ordo.WithGPU(-1))
	if !errors.Is(err, ordo.ErrInvalidArgument) {
		t.Fatalf("WithGPU(-1): %v, want ErrInvalidArgument", err)
	}
	if err := e.WaitAll(); err != nil || ran {
		t.Fatalf("WaitAll: %v, ran: %v", err, ran)
	}
}

// With a GPU: a GPU op runs with its GPU and a stream; compute ops go round robin over the
// compute streams.
func TestGPUOpsGetAStream(t *testing.T) {
	if ordo.DeviceCount() == 0 {
		t.Skip("no GPU")
	}
	e := newEngine(t, ordo.WithWorkers(2))
	v, _ := e.NewVar()
	infos := make([]ordo.ExecInfo, 8)
	for i := range infos {
		i := i
		err := e.Push(func(x *ordo.Exec) error {
			var err error
			infos[i], err = x.Info()
			return err
		}, nil, []*ordo.Var{v}, ordo.WithGPU(0))
		if err != nil {
			t.Fatalf("Push: %v", err)
		}
	}
	if err := e.Wait(v); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	streams := map[uintptr]bool{}
	for _, info := range infos {
		if info.GPU != 0 || info.Stream == 0 {
			t.Fatalf("Info() = %+v", info)
		}
		streams[info.Stream] = true
	}
	if len(streams) < 2 {
		t.Fatalf("8 ops on %d stream(s)", len(streams))
	}
}

// A pipeline run pushed as an op takes WithGPU like any push: refused the same ways.
func TestPipelinePushWithGPUErrors(t *testing.T) {
	e := newEngine(t, ordo.WithWorkers(2))
	p, err := e.NewPipeline(1, ordo.SerialPipe(func(pf *ordo.Pipeflow) error { return pf.Stop() }))
	if err != nil {
		t.Fatalf("NewPipeline: %v", err)
	}
	defer p.Destroy()
	if err := p.Push(nil, nil, ordo.WithGPU(-1)); !errors.Is(err, ordo.ErrInvalidArgument) {
		t.Fatalf("WithGPU(-1): %v, want ErrInvalidArgument", err)
	}
	n := ordo.DeviceCount()
	if err := p.Push(nil, nil, ordo.WithGPU(n)); !errors.Is(err, ordo.ErrNoDevice) {
		t.Fatalf("WithGPU(%d): %v, want ErrNoDevice", n, err)
	}
	if err := p.Run(); err != nil { // nothing was pushed: the pipeline is free
		t.Fatalf("Run: %v", err)
	}
}
