module github.com/ordo-engine/ordo/bindings/go

go 1.17
