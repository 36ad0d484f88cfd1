package ordo

// #include "shim.h"
import "C"

import (
	"runtime"
	"runtime/cgo"
)

// WaitAsync returns a channel that receives the outcome of every op pushed on v before the call
// (nil, or an *Error that errors.Is ErrOpFailed with the failing op's message) once they have all
// completed, and is then closed. It never blocks (ordo_wait_for_var_async). Unlike Wait, the wait
// is queued on v like a write: readers of v pushed after it start only after the readers pushed
// before it. If the wait cannot be queued (a deleted var, a closed engine), the channel receives
// that error at once.
func (e *Engine) WaitAsync(v *Var) <-chan error {
	ch := make(chan error, 1)
	if v == nil {
		ch <- &Error{Code: StatusInvalidHandle, Message: "WaitAsync: nil Var"}
		close(ch)
		return ch
	}
	h := cgo.NewHandle(ch)
	err := check(C.ordo_go_wait_async(C.uintptr_t(e.p), v.h, C.uintptr_t(h)))
	runtime.KeepAlive(e)
	runtime.KeepAlive(v)
	if err != nil {
		h.Delete()
		ch <- err
		close(ch)
	}
	return ch
}
