module github.com/meshd/meshd

go 1.26.0

require (
	github.com/fxamacker/cbor/v2 v2.9.6
	github.com/google/uuid v1.6.0
)

require github.com/x448/float16 v0.8.4 // indirect
