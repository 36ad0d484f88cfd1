package ordo_test

import (
	"errors"
	"fmt"

	ordo "github.com/ordo-engine/ordo/bindings/go"
)

// The README's example.
func Example() {
	e, err := ordo.NewEngine()
	if err != nil {
		panic(err)
	}
	defer e.Close()
	v, _ := e.NewVar() // v stands for x
	x := 0
	add := func(*ordo.Exec) error { x++; return nil }
	e.Push(add, nil, []*ordo.Var{v}) // two writers of v: in push order
	e.Push(add, nil, []*ordo.Var{v})
	e.Push(func(*ordo.Exec) error { fmt.Println("x =", x); return nil }, []*ordo.Var{v}, nil)
	e.Push(func(*ordo.Exec) error { return errors.New("no space left") }, nil, []*ordo.Var{v},
		ordo.WithName("save"))
	err = e.Wait(v)
	fmt.Println(errors.Is(err, ordo.ErrOpFailed), err)
	// Output:
	// x = 2
	// true ordo: op 'save' failed (code 3): no space left
}

// A deferred op, completed from another goroutine, and an asynchronous wait.
func ExampleExec_Defer() {
	e, _ := ordo.NewEngine()
	defer e.Close()
	v, _ := e.NewVar()
	e.Push(func(x *ordo.Exec) error {
		c, err := x.Defer()
		if err != nil {
			return err
		}
		go func() { c.Complete() }() // e.g. when an I/O finishes
		return nil
	}, nil, []*ordo.Var{v})
	fmt.Println(<-e.WaitAsync(v))
	// Output: <nil>
}

// Capture records pushes once; each Launch pushes them again, ordered with other pushes
// through the vars.
func ExampleEngine_Capture() {
	e, _ := ordo.NewEngine()
	defer e.Close()
	v, _ := e.NewVar()
	x := 1
	g, err := e.Capture(func() error { // this goroutine's pushes are recorded, not run
		e.Push(func(*ordo.Exec) error { x *= 10; return nil }, nil, []*ordo.Var{v})
		return e.Push(func(*ordo.Exec) error { x++; return nil }, nil, []*ordo.Var{v})
	})
	if err != nil {
		panic(err)
	}
	for i := 0; i < 3; i++ {
		g.Launch()
		e.Push(func(*ordo.Exec) error { fmt.Println("x =", x); return nil }, []*ordo.Var{v}, nil)
	}
	e.Wait(v)
	fmt.Println(g.Destroy()) // once its launched ops have finished
	// Output:
	// x = 11
	// x = 111
	// x = 1111
	// <nil>
}

// A pipeline of three pipes over 4 lines: pipe 0 reads tokens 0..9 into a slot per line (a
// line holds one token at a time), a parallel pipe squares them, a serial one collects them in
// token order.
func ExampleEngine_NewPipeline() {
	e, _ := ordo.NewEngine()
	defer e.Close()
	const lines = 4
	var slot [lines]int
	var squares []int
	p, err := e.NewPipeline(lines,
		ordo.SerialPipe(func(pf *ordo.Pipeflow) error { // generates tokens 0, 1, 2, ...
			if pf.Token() == 10 {
				return pf.Stop()
			}
			slot[pf.Line()] = int(pf.Token())
			return nil
		}),
		ordo.ParallelPipe(func(pf *ordo.Pipeflow) error {
			slot[pf.Line()] *= slot[pf.Line()]
			return nil
		}),
		ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
			squares = append(squares, slot[pf.Line()])
			return nil
		}))
	if err != nil {
		panic(err)
	}
	defer p.Destroy()
	err = p.Run()
	n, _ := p.NumTokens()
	fmt.Println(squares, n, err)
	// Output: [0 1 4 9 16 25 36 49 64 81] 10 <nil>
}

// Token deferral: frame 2 (a B-frame) waits for frame 4 to pass pipe 0, so the serial pipe sees
// 4 before 2. A token waiting for one never generated is dropped at the end of the run.
func ExamplePipeflow_Defer() {
	e, _ := ordo.NewEngine()
	defer e.Close()
	var order []uint64
	p, _ := e.NewPipeline(2,
		ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
			switch {
			case pf.Token() == 7:
				return pf.Stop()
			case pf.Token() == 2 && pf.NumDeferrals() == 0:
				return pf.Defer(4)
			case pf.Token() == 5:
				return pf.Defer(100) // never generated
			}
			return nil
		}),
		ordo.SerialPipe(func(pf *ordo.Pipeflow) error {
			order = append(order, pf.Token())
			return nil
		}))
	defer p.Destroy()
	err := p.Run()
	dropped, _ := p.Dropped()
	fmt.Println(order, errors.Is(err, ordo.ErrTokensDropped), dropped)
	// Output: [0 1 3 4 2 6] true [5]
}
