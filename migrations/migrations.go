// Package migrations holds stockhold's goose migrations, River's schema
// included, embedded so the binary migrates the database it runs against.
//
// Files 00001 to 00008 are River's own migration SQL for the River version
// pinned in go.mod, wrapped for goose; river_test.go fails when they drift from
// what that version ships (`go test ./migrations -update` rewrites them).
// Files are append-only once landed.
package migrations

import "embed"

// FS holds every migration file.
//
//go:embed *.sql
var FS embed.FS
