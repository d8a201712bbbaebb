// Package sizelimit holds the test that keeps stockhold's hand-written Go
// under app/ and jobs/ within the sizes a reader can walk: no file over
// 700 lines, no function over 80, no package over 6,000 lines (tests and
// generated code aside). It has no code of its own.
package sizelimit
