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
