// Package apiclient is a Go client of stockhold's HTTP API, generated from
// app/api/openapi.json by oapi-codegen (pinned in the Makefile; make
// generate writes client.gen.go, make check-generate fails when it is
// stale). It is committed, as sqlc's output is: the tests compile and run
// it offline, without fetching the generator, and a change to the document
// shows in review as the change it makes to a client. Its test drives the
// core flow against a real server, proving that what a client generates
// from the document works.
package apiclient
