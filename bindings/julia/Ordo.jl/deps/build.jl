# Builds deps/usr/lib/libordo_jl.so, the C half of Ordo.jl (ordo_jl.c), against an installed
# ordo found with pkg-config (set PKG_CONFIG_PATH for a non-standard prefix). Run by
# Pkg.build("Ordo"); by hand: julia deps/build.jl. CC picks the compiler (default cc).
cc = get(ENV, "CC", "cc")
pc(args...) = split(strip(read(`pkg-config $args ordo`, String)))
cflags = pc("--cflags")
libs = pc("--libs")
libdir = strip(read(`pkg-config --variable=libdir ordo`, String))
out = joinpath(@__DIR__, "usr", "lib", "libordo_jl.so")
mkpath(dirname(out))
run(`$cc -std=c11 -D_GNU_SOURCE -O2 -fPIC -shared -Wall -o $out $(joinpath(@__DIR__, "ordo_jl.c")) $cflags $libs -Wl,-rpath,$libdir -pthread`)
println("built $out")
