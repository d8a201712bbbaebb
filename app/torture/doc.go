// Package torture holds the torture test: every write path of stockhold
// driven at once against a handful of SKUs, on two instances of the
// service with their River workers, and scenes that combine features in
// pairs where they meet (seams_test.go), while a checker proves the books
// balance at checkpoints and at the end. It has no code of its own besides the test; `make
// torture` runs it (TORTURE_DURATION, TORTURE_SEED), and `make test` runs
// it for a minute.
package torture
