package ordo

import "sync/atomic"

// LiveOpHandles is, for the tests, how many op functions the binding holds through cgo.Handles
// (pushed or captured, and not yet let go).
func LiveOpHandles() int64 { return atomic.LoadInt64(&liveOps) }

// LivePipeHandles is, for the tests, how many pipe functions the binding holds through
// cgo.Handles (those of pipelines not yet destroyed).
func LivePipeHandles() int64 { return atomic.LoadInt64(&livePipes) }
