package ordo

// The functions that C calls: the op trampoline's target, the deleter of a skipped op's
// closure, the asynchronous wait's and the pipe trampoline's targets. (A file with //export may
// only declare in its preamble; the C side is shim.c.)

// #include "shim.h"
// #include <stdlib.h>
import "C"

import (
	"fmt"
	"runtime/cgo"
	"sync/atomic"
	"unsafe"
)

// liveOps counts the op functions held by cgo.Handles: pushed (or captured) and not yet let go.
var liveOps int64

func newOpHandle(fn func(*Exec) error) cgo.Handle {
	atomic.AddInt64(&liveOps, 1)
	return cgo.NewHandle(fn)
}

func deleteOpHandle(h cgo.Handle) {
	h.Delete()
	atomic.AddInt64(&liveOps, -1)
}

// goOrdoRun runs the op function behind handle. A one-shot op (keep == 0) runs once and lets its
// handle go here; a kept one (captured: it runs once per launch, maybe on several threads at
// once) keeps it until goOrdoFree. Each run gets an Exec of its own.
//
//export goOrdoRun
func goOrdoRun(handle C.uintptr_t, exec C.uintptr_t, keep C.int32_t) C.int32_t {
	h := cgo.Handle(handle)
	fn := h.Value().(func(*Exec) error)
	if keep == 0 {
		deleteOpHandle(h)
	}
	x := &Exec{fn: fn, exec: uintptr(exec)}
	err := x.call()
	if x.deferred {
		return 0 // the op completes through its Completion; fn's result is ignored, as in C
	}
	if err == nil {
		return 0
	}
	code, msg := opFailure(err)
	// A synchronous op's return value carries a code but no message: defer the op and complete
	// it at once to record both.
	cmsg := C.CString(msg)
	defer C.free(unsafe.Pointer(cmsg))
	if check(C.ordo_go_fail_running(exec, C.int32_t(code), cmsg)) != nil {
		return C.int32_t(code)
	}
	return 0
}

// goOrdoFree lets go of a skipped op's function, or a kept op's once its graph is destroyed.
//
//export goOrdoFree
func goOrdoFree(handle C.uintptr_t) { deleteOpHandle(cgo.Handle(handle)) }

//export goOrdoWaitDone
func goOrdoWaitDone(handle C.uintptr_t, status C.ordo_status, code C.int32_t, msg *C.char) {
	h := cgo.Handle(handle)
	ch := h.Value().(chan error)
	h.Delete()
	var err error
	if status != C.ORDO_OK {
		err = &Error{Code: Status(status), OpCode: int32(code), Message: C.GoString(msg)}
	}
	ch <- err // buffered: never blocks the engine thread
	close(ch)
}

// goOrdoPipe runs the pipe function behind handle for one token (the handle lives until the
// pipeline is destroyed or its pipes replaced; this call may run on several threads at once).
// The Pipeflow is valid for Stop and Defer during the call only. A failure (an error or a
// panic) is recorded for Run and Err, and its code returned.
//
//export goOrdoPipe
func goOrdoPipe(handle, pf C.uintptr_t, token C.uint64_t, line, pipe, deferrals C.uint32_t) C.int32_t {
	rec := cgo.Handle(handle).Value().(*pipeRec)
	f := &Pipeflow{pf: uintptr(pf), token: uint64(token), line: int(line), pipe: int(pipe),
		deferrals: int(deferrals), live: 1}
	err := f.call(rec.fn)
	atomic.StoreUint32(&f.live, 0)
	if err == nil {
		return 0
	}
	code, msg := opFailure(err)
	rec.st.record(pipeFailure{pipe: f.pipe, token: f.token, code: code, msg: msg, err: err})
	return C.int32_t(code)
}

// call runs the op's function; a panic fails the op with the panic's value as its message.
func (x *Exec) call() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &OpError{Code: DefaultOpCode, Message: fmt.Sprintf("panic: %v", r)}
		}
	}()
	return x.fn(x)
}
