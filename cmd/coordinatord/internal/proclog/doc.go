// Package proclog keeps the lines a child process writes to a pipe, its log, as they come, so
// that the end-to-end tests can show a process's log when it misbehaves and wait for a line
// saying that something happened instead of sleeping.
package proclog
