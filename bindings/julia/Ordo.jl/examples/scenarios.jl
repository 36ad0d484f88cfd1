# The scenarios every ordo binding checks (issue 24, item 6), for Ordo.jl. UNTESTED: written
# where no Julia could be had. Run from this package's folder, after Pkg.build:
#     julia --project -t 4 examples/scenarios.jl
# It prints one line per scenario and "N passed, N failed"; the exit status is 0 when all pass.
using Ordo

const results = Pair{String,Bool}[]

function scenario(f, name)
    ok = try
        f()
    catch err
        println(stderr, name, ": ", sprint(showerror, err))
        false
    end
    push!(results, name => ok === true)
    println(ok === true ? "ok   " : "FAIL ", name)
end

scenario("writes run in push order") do
    Engine(workers=2) do e
        v = Var(e)
        got = Int[]
        for i in 1:1000
            push!(e; writes=v) do
                push!(got, i)
            end
        end
        wait(v)
        got == 1:1000
    end
end

scenario("readers overlap") do
    Engine(workers=2) do e
        v = Var(e)
        arrived = Threads.Atomic{Int}(0)
        reader() = begin
            Threads.atomic_add!(arrived, 1)
            # yields while waiting: the other reader's task must be running meanwhile
            timedwait(() -> arrived[] >= 2, 20.0; pollint=0.001) == :ok ||
                error("the other reader never started")
        end
        push!(reader, e; reads=v)
        push!(reader, e; reads=v)
        wait(v)
        arrived[] == 2
    end
end

scenario("a failing op skips its dependent and surfaces as OrdoError") do
    Engine() do e
        a, b = Var(e), Var(e)
        ran = Threads.Atomic{Int}(0)
        push!(e; writes=a, name="producer") do
            throw(OpError(42, "disk on fire"))
        end
        push!(e; reads=a, writes=b, name="consumer") do
            Threads.atomic_add!(ran, 1)
        end
        err = try
            wait(b)
            nothing
        catch x
            x
        end
        all_err = try
            wait(e)
            nothing
        catch x
            x
        end
        err isa OrdoError && err.status == Ordo.OP_FAILED && err.opcode == 42 &&
            occursin("producer", err.message) && occursin("disk on fire", err.message) &&
            ran[] == 0 && all_err isa OrdoError && all_err.status == Ordo.OP_FAILED
    end
end

scenario("a deferred op completed from another thread") do
    Engine() do e
        v = Var(e)
        value = Ref(0)
        push!(e; writes=v, deferred=true) do c
            Threads.@spawn begin
                sleep(0.02)
                value[] = 7
                complete!(c)
            end
        end
        seen = Ref(-1)
        push!(e; reads=v) do
            seen[] = value[]
        end
        wait(v)
        seen[] == 7
    end
end

scenario("an async wait") do
    Engine() do e
        v = Var(e)
        box = Channel{Completion}(1)
        push!(e; writes=v, deferred=true) do c
            put!(box, c)
        end
        c = take!(box)
        t = wait_async(v)
        sleep(0.05)
        early = istaskdone(t)
        timed_out = try
            wait(v; timeout=0.01)
            false
        catch x
            x isa OrdoError && x.status == Ordo.TIMEOUT
        end
        complete!(c)
        wait(t)
        !early && timed_out && fetch(t) === nothing
    end
end

scenario("a captured graph runs once per launch, in order; misuse and close") do
    Engine(workers=2) do e
        v = Var(e)
        got = Int[]
        g = capture(e) do
            for i in 1:3
                push!(e; writes=v) do
                    push!(got, i)
                end
            end
        end
        none_yet = isempty(got)
        for _ in 1:10
            launch(g)
        end
        wait(v)
        status(f) = try
            f()
            Ordo.OK
        catch x
            x isa OrdoError ? x.status : rethrow()
        end
        refused = status(() -> capture(() -> wait(v), e)) == Ordo.INVALID_STATE &&
                  status(() -> capture(() -> launch(g), e)) == Ordo.INVALID_STATE
        ran = Threads.Atomic{Int}(0)
        dropped = try   # a block that throws: its recording is dropped, the exception goes on
            capture(e) do
                push!(() -> Threads.atomic_add!(ran, 1), e; writes=v)
                error("changed my mind")
            end
            false
        catch x
            x isa ErrorException
        end
        close(g)
        closed = !isopen(g) && status(() -> launch(g)) == Ordo.INVALID_HANDLE
        close(g)   # again: nothing
        # the captured closures are released (EV_RELEASE), none of the dropped one ran
        released = timedwait(() -> lock(() -> isempty(e.jobs), e.lock), 10.0) == :ok
        none_yet && got == repeat(1:3, 10) && refused && dropped && closed && released &&
            ran[] == 0
    end
end

scenario("an exit with work pending neither aborts nor hangs") do
    child = """
        using Ordo
        e = Engine(workers=2)
        v, w = Var(e), Var(e)
        for _ in 1:2
            push!(() -> sleep(3600), e; reads=v)   # op tasks still running at exit
        end
        for _ in 1:100
            push!(() -> nothing, e; writes=v)      # ops queued behind them
        end
        push!(c -> nothing, e; writes=w, deferred=true)   # never completed
        @async wait(v)
        sleep(0.2)
        println("child: exiting with work pending")
        exit(0)
        """
    cmd = `$(Base.julia_cmd()) --project=$(dirname(@__DIR__)) -t 2 -e $child`
    out = Pipe()
    p = run(pipeline(cmd; stdout=out, stderr=out); wait=false)
    close(out.in)
    text = @async read(out, String)
    if timedwait(() -> process_exited(p), 120.0) != :ok
        kill(p)
        println(stderr, "the child hung at exit")
        false
    else
        success(p) && occursin("child: exiting with work pending", fetch(text))
    end
end

passed = count(last, results)
failed = length(results) - passed
println("$passed passed, $failed failed")
exit(failed == 0 ? 0 : 1)
