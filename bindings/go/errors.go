package ordo

// #include "shim.h"
// #include <stdlib.h>
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// Status is an ordo_status: StatusOK or one of the ORDO_ERR_* codes.
type Status int32

// The status codes of the C API (ordo.h).
const (
	StatusOK              Status = C.ORDO_OK
	StatusInvalidArgument Status = C.ORDO_ERR_INVALID_ARGUMENT
	StatusInvalidHandle   Status = C.ORDO_ERR_INVALID_HANDLE
	StatusOpFailed        Status = C.ORDO_ERR_OP_FAILED
	StatusTimeout         Status = C.ORDO_ERR_TIMEOUT
	StatusNoDevice        Status = C.ORDO_ERR_NO_DEVICE
	StatusShutdown        Status = C.ORDO_ERR_SHUTDOWN
	StatusNoMemory        Status = C.ORDO_ERR_NO_MEMORY
	StatusInvalidState    Status = C.ORDO_ERR_INVALID_STATE
	StatusWouldDeadlock   Status = C.ORDO_ERR_WOULD_DEADLOCK
	StatusUnsupported     Status = C.ORDO_ERR_UNSUPPORTED
	StatusInternal        Status = C.ORDO_ERR_INTERNAL
	StatusTokensDropped   Status = C.ORDO_ERR_TOKENS_DROPPED
)

// String returns the status's C name, such as "ORDO_ERR_TIMEOUT".
func (s Status) String() string { return C.GoString(C.ordo_status_string(C.ordo_status(s))) }

// Sentinel errors, one per status, for errors.Is: every *Error returned by this package "is" the
// sentinel of its Code, so errors.Is(err, ordo.ErrTimeout) tells a timed-out wait.
var (
	ErrInvalidArgument = errors.New("ordo: invalid argument")
	ErrInvalidHandle   = errors.New("ordo: invalid handle")
	ErrOpFailed        = errors.New("ordo: op failed")
	ErrTimeout         = errors.New("ordo: timeout")
	ErrNoDevice        = errors.New("ordo: no device")
	ErrShutdown        = errors.New("ordo: engine shut down")
	ErrNoMemory        = errors.New("ordo: out of memory")
	ErrInvalidState    = errors.New("ordo: invalid state")
	ErrWouldDeadlock   = errors.New("ordo: would deadlock")
	ErrUnsupported     = errors.New("ordo: unsupported")
	ErrInternal        = errors.New("ordo: internal error")
	// ErrTokensDropped: a pipeline run ended with tokens whose deferral was never resolved
	// (Pipeline.Run; Pipeline.Dropped names them). The rest of the run is intact.
	ErrTokensDropped = errors.New("ordo: tokens dropped")
)

var sentinels = map[Status]error{
	StatusInvalidArgument: ErrInvalidArgument,
	StatusInvalidHandle:   ErrInvalidHandle,
	StatusOpFailed:        ErrOpFailed,
	StatusTimeout:         ErrTimeout,
	StatusNoDevice:        ErrNoDevice,
	StatusShutdown:        ErrShutdown,
	StatusNoMemory:        ErrNoMemory,
	StatusInvalidState:    ErrInvalidState,
	StatusWouldDeadlock:   ErrWouldDeadlock,
	StatusUnsupported:     ErrUnsupported,
	StatusInternal:        ErrInternal,
	StatusTokensDropped:   ErrTokensDropped,
}

// Error is a failed ordo call: its status and the library's message for it.
type Error struct {
	Code Status // the call's status, never StatusOK
	// OpCode is, for a wait that returned StatusOpFailed, the failing op's own code (what its
	// function returned, see OpError); 0 otherwise or when it could not be read.
	OpCode  int32
	Message string // ordo_last_error_message() of the failed call, "" if none
	// Err is, for a Pipeline.Run that a pipe function failed, that function's error (a panic:
	// an *OpError "panic: ..."); nil otherwise. Unwrap returns it, so errors.Is and errors.As
	// see through to it.
	Err error
}

func (e *Error) Error() string {
	if e.Message == "" {
		return "ordo: " + e.Code.String()
	}
	return "ordo: " + e.Message
}

// Unwrap returns e.Err: the error of the pipe function that failed a pipeline run, or nil.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is the sentinel error of e's Code (ErrTimeout for StatusTimeout...).
func (e *Error) Is(target error) bool {
	s, ok := sentinels[e.Code]
	return ok && s == target
}

// OpError fails an op with a chosen code: return it from an op's function (or pass it to
// Completion.Fail) to fail the op with that code and message. The code is recorded in the error
// state of the vars the op mutates, and comes back as Error.OpCode from a wait on them. Any other
// non-nil error fails the op with DefaultOpCode and the error's text.
type OpError struct {
	Code    int32 // non-zero; 0 is taken as DefaultOpCode
	Message string
}

func (e *OpError) Error() string { return fmt.Sprintf("op failed (code %d): %s", e.Code, e.Message) }

// DefaultOpCode is the code of an op that failed with an error other than *OpError, or panicked
// (ORDO_ERR_OP_FAILED, as the C library counts a C++ exception escaping a callback).
const DefaultOpCode int32 = C.ORDO_ERR_OP_FAILED

// opFailure turns an op's error into the code and message the engine records.
func opFailure(err error) (int32, string) {
	var oe *OpError
	if errors.As(err, &oe) {
		if oe.Code == 0 {
			return DefaultOpCode, oe.Message
		}
		return oe.Code, oe.Message
	}
	return DefaultOpCode, err.Error()
}

// check turns a shim result into nil or an *Error, freeing the C message.
func check(r C.ordo_go_ret) error {
	if r.msg != nil {
		defer C.free(unsafe.Pointer(r.msg))
	}
	if r.status == C.ORDO_OK {
		return nil
	}
	e := &Error{Code: Status(r.status)}
	if r.msg != nil {
		e.Message = C.GoString(r.msg)
	}
	if e.Code == StatusOpFailed {
		e.OpCode = int32(r.code)
	}
	return e
}
