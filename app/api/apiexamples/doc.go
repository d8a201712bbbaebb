// Package apiexamples holds TestOpenAPIExamples, which drives a real server
// through every operation of app/api/openapi.json and holds the document's
// examples to what it answers (`make examples` writes them in). It is a
// package of its own so that its test runs in a process of its own: the
// process's metrics and hot SKUs, which two examples show, count its
// requests alone.
package apiexamples
