"""
    Ordo

Julia binding of ordo, a task dependency engine (`libordo.so`). UNTESTED: no Julia was
available where it was written; its C half (`deps/ordo_jl.c`) is tested from C. See README.md.

Ops are Julia functions pushed with the variables they read and write. Two ops that share a
`Var`, where at least one writes it, run in push order; readers may overlap; everything else runs
concurrently. Each op runs as a Julia task (`Threads.@spawn`): the engine's threads never run
Julia code (JuliaLang/julia#55525). An op's callback in C defers the op and queues it for a
task woken through a `Base.AsyncCondition` (`uv_async_send`); that task spawns the op's task,
which calls `ordo_complete`. No Julia thread ever blocks in ordo: waits and `close` run on a
thread of the C half and answer through the same queue, so the waiting task just yields.

Graphs (`capture`, `launch`): a capture runs on a thread of the C half, since ordo captures per
OS thread and a task may change threads; the captured ops are kept: each launch queues their
runs, and the graph's `close` releases them.
"""
module Ordo

export Engine, Var, Completion, OrdoError, OpError, wait_async, complete!, fail!, clear_error!,
       Graph, capture, launch

const libordo_jl = joinpath(@__DIR__, "..", "deps", "usr", "lib", "libordo_jl.so")

# Status codes (ordo.h).
const OK = Int32(0)
const INVALID_ARGUMENT = Int32(1)
const INVALID_HANDLE = Int32(2)
const OP_FAILED = Int32(3)
const TIMEOUT = Int32(4)
const NO_DEVICE = Int32(5)
const SHUTDOWN = Int32(6)
const NO_MEMORY = Int32(7)
const INVALID_STATE = Int32(8)
const WOULD_DEADLOCK = Int32(9)

# Event and call kinds (deps/ordo_jl.h).
const EV_RUN = Int32(1)
const EV_DROP = Int32(2)
const EV_DONE = Int32(3)
const EV_RUN_KEPT = Int32(4)   # a captured op's run for a launch: keep the closure
const EV_RELEASE = Int32(5)    # a captured op's graph is gone: forget the closure
const CALL_WAIT_VAR = Int32(1)
const CALL_WAIT_ALL = Int32(2)
const CALL_DESTROY = Int32(3)
const CALL_WAIT_ASYNC = Int32(4)

const KINDS = Dict(:default => Int32(0), :naive => Int32(1), :pooled => Int32(2),
                   :per_device => Int32(3))
const PROPS = Dict(:normal => Int32(0), :cpu_prioritized => Int32(1),
                   :copy_to_device => Int32(2), :copy_from_device => Int32(3), :async => Int32(4))

const MSG_CAP = 1024

"""
    OrdoError(status, opcode, message)

A failed ordo call. `status` is one of `Ordo.OP_FAILED`, `Ordo.TIMEOUT`, `Ordo.INVALID_HANDLE`,
`Ordo.SHUTDOWN`, ...; for `OP_FAILED` from a wait, `opcode` is the failing op's code.
"""
struct OrdoError <: Exception
    status::Int32
    opcode::Int32
    message::String
end

status_name(s::Integer) =
    unsafe_string(ccall((:ordo_status_string, libordo_jl), Cstring, (Int32,), s))

Base.showerror(io::IO, e::OrdoError) = print(io, "OrdoError(", status_name(e.status), "): ",
                                             e.message)

"""
    OpError(code, message)

Throw it from an op (or pass it to `fail!`) to fail the op with that code; any other exception
fails it with code `Ordo.OP_FAILED` (3) and the exception's text.
"""
struct OpError <: Exception
    code::Int32
    message::String
end

Base.showerror(io::IO, e::OpError) = print(io, "OpError(", e.code, "): ", e.message)

function failure(err)
    err isa OpError && return (err.code == 0 ? OP_FAILED : err.code, err.message)
    return (OP_FAILED, sprint(showerror, err))
end

msgbuf() = zeros(UInt8, MSG_CAP)
message(buf::Vector{UInt8}) = String(buf[1:something(findfirst(==(0x00), buf), length(buf) + 1) - 1])
check(st::Int32, buf::Vector{UInt8}) = st == OK || throw(OrdoError(st, 0, message(buf)))

struct Job
    f::Any
    deferred::Bool
end

"""
    Engine(; kind=:default, workers=0)
    Engine(f; kind, workers)   # do-block: closes the engine when f returns

An engine and its worker threads (`kind` in `:default`, `:naive`, `:pooled`, `:per_device`;
`workers` 0 means the library's default). Close it with `close(e)`, which waits for every op.
"""
mutable struct Engine
    ptr::Ptr{Cvoid}
    hub::Ptr{Cvoid}              # C_NULL once closed
    cond::Base.AsyncCondition
    lock::ReentrantLock
    jobs::Dict{UInt64,Job}       # op id => closure, until the op runs or is skipped (a
                                 # captured op's: until its graph is closed)
    calls::Dict{UInt64,Channel{Tuple{Int32,Int32,String}}}  # call id => where its result goes
    graphs::Set{Any}             # the Graphs of this engine not yet closed
    next_id::UInt64
    closed::Bool
    drainer::Union{Task,Nothing}
end

const OPEN_ENGINES = Set{Engine}()
const OPEN_LOCK = ReentrantLock()

function Engine(; kind::Symbol=:default, workers::Integer=0)
    cond = Base.AsyncCondition()
    hub = ccall((:ordo_jl_hub_new, libordo_jl), Ptr{Cvoid}, (Ptr{Cvoid}, Ptr{Cvoid}),
                cglobal(:uv_async_send), cond.handle)
    if hub == C_NULL
        close(cond)
        throw(OutOfMemoryError())
    end
    out = Ref{Ptr{Cvoid}}(C_NULL)
    buf = msgbuf()
    st = ccall((:ordo_jl_engine_create, libordo_jl), Int32,
               (Int32, Int32, Ptr{Ptr{Cvoid}}, Ptr{UInt8}, Csize_t),
               KINDS[kind], workers, out, buf, length(buf))
    if st != OK
        ccall((:ordo_jl_hub_free, libordo_jl), Cvoid, (Ptr{Cvoid},), hub)
        close(cond)
        throw(OrdoError(st, 0, message(buf)))
    end
    e = Engine(out[], hub, cond, ReentrantLock(), Dict{UInt64,Job}(),
               Dict{UInt64,Channel{Tuple{Int32,Int32,String}}}(), Set{Any}(), 1, false, nothing)
    e.drainer = @async drain_loop(e)
    lock(() -> push!(OPEN_ENGINES, e), OPEN_LOCK)
    return e
end

function Engine(f::Function; kw...)
    e = Engine(; kw...)
    try
        return f(e)
    finally
        close(e)
    end
end

# A capture open in a task (`capture`): in its task-local storage under :ordo_capture. Task-
# local, not per thread: only the capturing task's own pushes are recorded.
struct Capture
    engine::Engine
    ptr::Ptr{Cvoid}   # ordo_jl_capture*
end

# The capture the current task has open on e, or nothing.
function capturing(e::Engine)
    c = get(task_local_storage(), :ordo_capture, nothing)
    return c !== nothing && c.engine === e ? c : nothing
end

# What ordo refuses on a thread that captures the engine, refused to the task that captures it
# (the C half's capture thread is not the caller's, so ordo cannot see it).
function refuse_in_capture(e::Engine, api::String)
    capturing(e) === nothing || throw(OrdoError(INVALID_STATE, 0, string(api,
        ": this task is capturing the engine's pushes (Ordo.capture): waits, var deletes and ",
        "clears, close and graph launches cannot be captured; end the capture first")))
    return nothing
end

# The task woken by the AsyncCondition: uv_async_send coalesces wake-ups, so each wake drains
# everything queued.
function drain_loop(e::Engine)
    while true
        drain(e)
        try
            wait(e.cond)
        catch err
            err isa EOFError && return   # the condition was closed: the engine is closed
            rethrow()
        end
    end
end

function drain(e::Engine)
    events = Tuple{Int32,UInt64,UInt64,Int32,Int32,String}[]
    kind, id, c = Ref{Int32}(0), Ref{UInt64}(0), Ref{UInt64}(0)
    status, code, msg = Ref{Int32}(0), Ref{Int32}(0), Ref{Ptr{UInt8}}(C_NULL)
    lock(e.lock) do
        e.hub == C_NULL && return
        while ccall((:ordo_jl_pop, libordo_jl), Int32,
                    (Ptr{Cvoid}, Ref{Int32}, Ref{UInt64}, Ref{UInt64}, Ref{Int32}, Ref{Int32},
                     Ref{Ptr{UInt8}}), e.hub, kind, id, c, status, code, msg) != 0
            text = msg[] == C_NULL ? "" : unsafe_string(msg[])
            msg[] == C_NULL || ccall((:ordo_jl_free, libordo_jl), Cvoid, (Ptr{UInt8},), msg[])
            push!(events, (kind[], id[], c[], status[], code[], text))
        end
    end
    for (k, i, comp, st, cd, text) in events
        if k == EV_RUN || k == EV_RUN_KEPT
            job = lock(() -> k == EV_RUN ? pop!(e.jobs, i, nothing) : get(e.jobs, i, nothing),
                       e.lock)
            if job === nothing   # cannot happen; never leave an op hanging
                complete_raw(comp, OP_FAILED, "Ordo.jl: no closure for this op")
            else
                Threads.@spawn run_job(e, job, comp)
            end
        elseif k == EV_DROP || k == EV_RELEASE
            lock(() -> delete!(e.jobs, i), e.lock)
        else
            ch = lock(() -> pop!(e.calls, i, nothing), e.lock)
            ch === nothing || put!(ch, (st, cd, text))
        end
    end
end

# An op's task. Whatever happens, the op is completed exactly once (or by its Completion).
function run_job(e::Engine, job::Job, c::UInt64)
    task_local_storage(:ordo_engine, e)   # close(e) from inside an op would never return
    if job.deferred
        comp = Completion(c)
        try
            job.f(comp)
        catch err
            fail!(comp, err)   # does nothing if the op already completed
        end
    else
        code, text = OK, ""
        try
            job.f()
        catch err
            code, text = try
                failure(err)
            catch
                (OP_FAILED, "an exception whose message could not be shown")
            end
        end
        complete_raw(c, code, text)
    end
    return nothing
end

function complete_raw(c::UInt64, code::Int32, text::String)
    buf = msgbuf()
    st = ccall((:ordo_jl_complete, libordo_jl), Int32,
               (UInt64, Int32, Cstring, Ptr{UInt8}, Csize_t), c, code,
               replace(text, '\0' => ' '), buf, length(buf))
    return (st, buf)
end

"""
    Completion

Handed to a deferred op (`push!(...; deferred=true)`): `complete!(c)` or `fail!(c, err)` once,
from any task or thread. A Completion garbage collected unused fails its op.
"""
mutable struct Completion
    c::UInt64
    used::Threads.Atomic{Int}
    function Completion(c::UInt64)
        comp = new(c, Threads.Atomic{Int}(0))
        finalizer(comp) do x
            # ccall only: a finalizer may not switch tasks.
            if Threads.atomic_xchg!(x.used, 1) == 0
                ccall((:ordo_jl_complete, libordo_jl), Int32, (UInt64, Int32, Cstring, Ptr{UInt8}, Csize_t),
                      x.c, OP_FAILED, "the op's Completion was garbage collected unused", C_NULL, 0)
            end
        end
        return comp
    end
end

function finish!(comp::Completion, code::Int32, text::String)
    Threads.atomic_xchg!(comp.used, 1) == 0 ||
        throw(OrdoError(INVALID_HANDLE, 0, "ordo_complete: the completion was already used"))
    st, buf = complete_raw(comp.c, code, text)
    check(st, buf)
    return nothing
end

"Completes a deferred op successfully."
complete!(comp::Completion) = finish!(comp, OK, "")

"Completes a deferred op as failed: `err` as a thrown exception (see `OpError`)."
function fail!(comp::Completion, err)
    Threads.atomic_add!(comp.used, 0) == 0 || return nothing
    code, text = failure(err)
    try
        finish!(comp, code, text)
    catch e
        e isa OrdoError || rethrow()
    end
    return nothing
end

fail!(comp::Completion, code::Integer, text::AbstractString) = fail!(comp, OpError(code, text))

"""
    Var(e::Engine)

A variable: stands for data that ops read or write. `delete!(v)` deletes it (ordered after the
ops pushed before on it); `wait(v)`, `wait_async(v)`, `clear_error!(v)`.
"""
mutable struct Var
    engine::Engine
    h::UInt64
end

function Var(e::Engine)
    e.closed && throw(OrdoError(SHUTDOWN, 0, "Var: the engine is closed"))
    out = Ref{UInt64}(0)
    buf = msgbuf()
    st = ccall((:ordo_jl_var_new, libordo_jl), Int32, (Ptr{Cvoid}, Ref{UInt64}, Ptr{UInt8}, Csize_t),
               e.ptr, out, buf, length(buf))
    check(st, buf)
    return Var(e, out[])
end

function Base.delete!(v::Var)
    refuse_in_capture(v.engine, "delete!")
    buf = msgbuf()
    check(ccall((:ordo_jl_var_delete, libordo_jl), Int32, (Ptr{Cvoid}, UInt64, Ptr{UInt8}, Csize_t),
                v.engine.ptr, v.h, buf, length(buf)), buf)
    return nothing
end

"Clears `v`'s error state, ordered like a write."
function clear_error!(v::Var)
    refuse_in_capture(v.engine, "clear_error!")
    buf = msgbuf()
    check(ccall((:ordo_jl_var_clear_error, libordo_jl), Int32,
                (Ptr{Cvoid}, UInt64, Ptr{UInt8}, Csize_t), v.engine.ptr, v.h, buf, length(buf)), buf)
    return nothing
end

handles(e::Engine, v::Var) = handles(e, (v,))
function handles(e::Engine, vs)
    hs = UInt64[]
    for v in vs
        v isa Var || throw(ArgumentError("reads and writes hold Vars, got $(typeof(v))"))
        v.engine === e || throw(ArgumentError("a Var of another engine"))
        push!(hs, v.h)
    end
    return hs
end

"""
    push!(f, e::Engine; reads=(), writes=(), name=nothing, priority=0, prop=:normal, deferred=false)
    push!(e::Engine, f; ...)

Pushes `f` as an op. `f()` runs as a Julia task once every op pushed before it that shares a Var
with it (where either writes it) has completed; throwing fails the op (see `OpError`), and the
ops that depend on it are skipped. With `deferred=true`, `f(c::Completion)` is called instead and
the op completes when `complete!(c)` or `fail!(c, ...)` is called, from anywhere.
Inside `f`, do not wait for an op that depends on `f`'s own op: that wait can never return.
Inside `capture(e)`'s block, the task's pushes to `e` are recorded instead (see `capture`).
"""
function Base.push!(f, e::Engine; reads=(), writes=(), name::Union{Nothing,AbstractString}=nothing,
                    priority::Integer=0, prop::Symbol=:normal, deferred::Bool=false)
    rs, ws = handles(e, reads), handles(e, writes)
    id = lock(e.lock) do
        e.closed && throw(OrdoError(SHUTDOWN, 0, "push!: the engine is closed"))
        i = e.next_id
        e.next_id += 1
        e.jobs[i] = Job(f, deferred)   # before the push: the op may be queued for us at once
        i
    end
    cname = name === nothing ? nothing : String(name)
    buf = msgbuf()
    cap = capturing(e)
    st = GC.@preserve cname if cap === nothing
        ccall((:ordo_jl_push, libordo_jl), Int32,
            (Ptr{Cvoid}, Ptr{Cvoid}, UInt64, Ptr{UInt64}, Csize_t, Ptr{UInt64}, Csize_t, Int32,
             Int32, Ptr{UInt8}, Ptr{UInt8}, Csize_t),
            e.hub, e.ptr, id, rs, length(rs), ws, length(ws), priority, PROPS[prop],
            cname === nothing ? Ptr{UInt8}(C_NULL) : pointer(cname), buf, length(buf))
    else   # recorded, on the capture's thread (a kept op: its closure stays until close(g))
        ccall((:ordo_jl_capture_push, libordo_jl), Int32,
            (Ptr{Cvoid}, UInt64, Ptr{UInt64}, Csize_t, Ptr{UInt64}, Csize_t, Int32, Int32,
             Ptr{UInt8}, Ptr{UInt8}, Csize_t),
            cap.ptr, id, rs, length(rs), ws, length(ws), priority, PROPS[prop],
            cname === nothing ? Ptr{UInt8}(C_NULL) : pointer(cname), buf, length(buf))
    end
    if st != OK
        lock(() -> delete!(e.jobs, id), e.lock)
        throw(OrdoError(st, 0, message(buf)))
    end
    return e
end

Base.push!(e::Engine, f; kw...) = push!(f, e; kw...)

# Starts a call of the C half; its result arrives on the returned channel.
function start_call(e::Engine, what::Int32, h::UInt64, timeout)
    ch = Channel{Tuple{Int32,Int32,String}}(1)
    id = lock(e.lock) do
        e.hub == C_NULL && throw(OrdoError(SHUTDOWN, 0, "the engine is closed"))
        i = e.next_id
        e.next_id += 1
        e.calls[i] = ch
        i
    end
    # seconds to ns; past 2^60 ns ordo means no timeout anyway
    ns = timeout === nothing ? typemax(UInt64) :
         UInt64(min(round(max(0.0, Float64(timeout)) * 1e9), 2.0^61))
    buf = msgbuf()
    st = ccall((:ordo_jl_start, libordo_jl), Int32,
               (Ptr{Cvoid}, UInt64, Int32, Ptr{Cvoid}, UInt64, UInt64, Ptr{UInt8}, Csize_t),
               e.hub, id, what, e.ptr, h, ns, buf, length(buf))
    if st != OK
        lock(() -> delete!(e.calls, id), e.lock)
        throw(OrdoError(st, 0, message(buf)))
    end
    return ch
end

function result(ch::Channel{Tuple{Int32,Int32,String}})
    st, code, text = take!(ch)
    st == OK || throw(OrdoError(st, code, text))
    return nothing
end

"""
    wait(v::Var; timeout=nothing)

Waits (yielding: other tasks keep running) until every op pushed before the call that reads or
writes `v` has completed. Throws `OrdoError` with status `OP_FAILED` (the failing op's message and
`opcode`) when `v` is then in an error state, `TIMEOUT` after `timeout` seconds.
"""
function Base.wait(v::Var; timeout::Union{Nothing,Real}=nothing)
    refuse_in_capture(v.engine, "wait")
    return result(start_call(v.engine, CALL_WAIT_VAR, v.h, timeout))
end

"""
    wait(e::Engine; timeout=nothing)

Waits until every op pushed before has completed; throws `OP_FAILED` if any failed since the
previous such wait (the first failure's message).
"""
function Base.wait(e::Engine; timeout::Union{Nothing,Real}=nothing)
    refuse_in_capture(e, "wait")
    return result(start_call(e, CALL_WAIT_ALL, UInt64(0), timeout))
end

"""
    wait_async(v::Var) -> Task

Starts waiting for the ops pushed on `v` so far (`ordo_wait_for_var_async`: queued on `v` like a
write) and returns a task: `wait(t)`/`fetch(t)` return once they have completed, and throw a
`TaskFailedException` wrapping the `OrdoError` if `v` is then in an error state.
"""
function wait_async(v::Var)
    refuse_in_capture(v.engine, "wait_async")
    ch = start_call(v.engine, CALL_WAIT_ASYNC, v.h, nothing)
    return @async result(ch)
end

"""
    close(e::Engine)

Shuts the engine down: waits (yielding) for every op pushed so far, deferred ones included,
joins the workers, then closes the engine's graphs still open. Later pushes throw `SHUTDOWN`.
Do not call it from inside an op of `e`.
"""
function Base.close(e::Engine)
    get(task_local_storage(), :ordo_engine, nothing) === e &&
        throw(OrdoError(WOULD_DEADLOCK, 0, "close: called from inside an op of this engine"))
    refuse_in_capture(e, "close")
    first = lock(e.lock) do
        was = e.closed
        e.closed = true
        !was
    end
    first || return nothing
    ch = start_call(e, CALL_DESTROY, UInt64(0), nothing)
    st, _, text = take!(ch)
    # Every op has finished, so no launch is in flight: close the graphs (their captured ops'
    # RELEASEs are drained below; one that a launch racing this close holds stays open).
    for g in lock(() -> collect(e.graphs), e.lock)
        try
            close(g)
        catch err
            err isa OrdoError || rethrow()
        end
    end
    # No event can be queued any more after hub_close; answer the waits still open (they raced
    # the close) with SHUTDOWN, forget the closures of graphs still open (never run again: their
    # launches are SHUTDOWN now), then let the C half go (such a graph holds it until closed).
    drain(e)
    pending = lock(e.lock) do
        ccall((:ordo_jl_hub_close, libordo_jl), Cvoid, (Ptr{Cvoid},), e.hub)
        rest = collect(values(e.calls))
        empty!(e.calls)
        empty!(e.jobs)
        ccall((:ordo_jl_hub_free, libordo_jl), Cvoid, (Ptr{Cvoid},), e.hub)
        e.hub = C_NULL
        rest
    end
    for ch in pending
        put!(ch, (SHUTDOWN, Int32(0), "the engine was closed"))
    end
    close(e.cond)
    lock(() -> delete!(OPEN_ENGINES, e), OPEN_LOCK)
    st == OK || throw(OrdoError(st, 0, text))
    return nothing
end

Base.isopen(e::Engine) = !e.closed

"""
    Graph

A captured sequence of pushes (`capture`): `launch(g)` pushes them again, in capture order, as if
they were pushed again at that moment (the same closures, vars, names, priorities and props,
ordered against every other push and wait through the vars; failures and skips as for pushed
ops). `close(g)` destroys it and lets go of its closures; `isopen(g)`.

Like an `Engine`, a Graph has no finalizer: it stays alive (in its engine) until `close(g)`, or
`close` of its engine, which closes the graphs still open.
"""
mutable struct Graph
    engine::Engine
    ptr::Ptr{Cvoid}   # ordo_graph*: a handle with a generation, never reused, so safe after close
    open::Bool
end

# Ends a capture (always: the C half frees it): (status, ordo_graph* or C_NULL, message buffer).
function end_capture(cap::Capture)
    out = Ref{Ptr{Cvoid}}(C_NULL)
    buf = msgbuf()
    st = ccall((:ordo_jl_capture_end, libordo_jl), Int32,
               (Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Ptr{UInt8}, Csize_t), cap.ptr, out, buf, length(buf))
    return (st, out[], buf)
end

"""
    capture(f, e::Engine) -> Graph

    g = Ordo.capture(e) do
        push!(step1, e; writes=v)
        push!(step2, e; reads=v, writes=w)
    end

Runs `f()` and records the pushes to `e` that `f`'s own task makes (with `push!`) into a Graph,
running none of them. Pushes by other tasks (also tasks `f` starts, and ops' tasks), and pushes
to other engines, are made as usual. A push that fails throws as it would outside a capture, and
records nothing. A captured closure runs once per `launch`, maybe on two tasks at once (two
launches of an op that only reads, or uses no var); it is released once, when the graph is
closed.

While `f` runs, its task's `wait`, `wait_async`, `delete!`, `clear_error!` and `close` on `e`,
`launch` of a graph of `e`, and a nested `capture` throw `OrdoError` with status
`INVALID_STATE`. The capture always ends when `f` returns or throws; if `f` throws, what it
recorded is dropped (no closure of it runs) and the exception goes on. Throws `SHUTDOWN` when
`e` is closed before or during the capture.
"""
function capture(f, e::Engine)
    tls = task_local_storage()
    haskey(tls, :ordo_capture) && throw(OrdoError(INVALID_STATE, 0,
        "capture: this task is already capturing (captures do not nest); end that capture first"))
    out = Ref{Ptr{Cvoid}}(C_NULL)
    buf = msgbuf()
    st = lock(e.lock) do   # the hub is not freed meanwhile (close); the capture then holds it
        e.closed && throw(OrdoError(SHUTDOWN, 0, "capture: the engine is closed"))
        ccall((:ordo_jl_capture_begin, libordo_jl), Int32,
              (Ptr{Cvoid}, Ptr{Cvoid}, Ptr{Ptr{Cvoid}}, Ptr{UInt8}, Csize_t),
              e.hub, e.ptr, out, buf, length(buf))
    end
    check(st, buf)
    cap = Capture(e, out[])
    tls[:ordo_capture] = cap
    try
        f()
    catch
        delete!(tls, :ordo_capture)
        st, ptr, _ = end_capture(cap)
        # never launched, so never in flight: its closures are released (EV_RELEASE)
        st == OK && ccall((:ordo_jl_graph_destroy, libordo_jl), Int32,
                          (Ptr{Cvoid}, Ptr{UInt8}, Csize_t), ptr, C_NULL, 0)
        rethrow()
    end
    delete!(tls, :ordo_capture)
    st, ptr, buf = end_capture(cap)
    check(st, buf)
    g = Graph(e, ptr, true)
    lock(() -> push!(e.graphs, g), e.lock)
    return g
end

"""
    launch(g::Graph)

Pushes the captured ops again, in capture order, and returns at once, like `push!`. Any task
may launch, also from inside an op, and several at once (their ops may interleave, each ordered
as one push). Throws `OrdoError`: `INVALID_HANDLE` after `close(g)` (or `close` of the engine,
which closes it), or when a var the graph uses was deleted (the ops before the first one that
uses it were pushed; the message says how many); `INVALID_STATE` inside a capture of the
engine.
"""
function launch(g::Graph)
    refuse_in_capture(g.engine, "launch")
    buf = msgbuf()
    check(ccall((:ordo_jl_graph_launch, libordo_jl), Int32, (Ptr{Cvoid}, Ptr{UInt8}, Csize_t),
                g.ptr, buf, length(buf)), buf)
    return nothing
end

"""
    close(g::Graph)

Destroys the graph and lets go of its captured closures. Throws `OrdoError` with status
`INVALID_STATE`, and does nothing, while a launch is in flight (its ops not yet finished: wait
for them first, e.g. `wait(e)`). Closing a closed graph does nothing. Works after `close` of
the engine.
"""
function Base.close(g::Graph)
    e = g.engine
    buf = msgbuf()
    st = lock(e.lock) do
        g.open || return OK
        s = ccall((:ordo_jl_graph_destroy, libordo_jl), Int32, (Ptr{Cvoid}, Ptr{UInt8}, Csize_t),
                  g.ptr, buf, length(buf))
        if s == OK
            g.open = false
            delete!(e.graphs, g)
        end
        s
    end
    check(st, buf)
    return nothing
end

Base.isopen(g::Graph) = g.open

function __init__()
    isfile(libordo_jl) || @warn "Ordo: $libordo_jl is missing; run Pkg.build(\"Ordo\")"
    # At exit, stop every hub from calling uv_async_send before libuv's handles go away. Work
    # still pending is abandoned (not drained): an exit neither waits for it nor crashes on it.
    atexit() do
        lock(OPEN_LOCK) do
            for e in OPEN_ENGINES
                e.hub == C_NULL ||
                    ccall((:ordo_jl_hub_close, libordo_jl), Cvoid, (Ptr{Cvoid},), e.hub)
            end
        end
    end
end

end # module
