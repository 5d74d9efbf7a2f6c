// Command funclen fails when a function of a non-test, non-generated Go file is longer than a
// limit, counted in lines from its func keyword to its closing brace. make lint runs it next to
// gocyclo: gocyclo bounds how many paths a function has, funclen how much of it there is to read,
// and a function over either limit is split into named steps.
//
//	go run ./internal/funclen -max 120 [-allow FILE:FUNC=LINES]... DIR...
//
// It walks each DIR as the go command does (skipping testdata and directories whose names start
// with "." or "_"), whatever module a directory belongs to. A file is generated when it carries
// the standard "// Code generated ... DO NOT EDIT." comment. Functions are named as gocyclo names
// them: serve, (*Log).recover, (Config).Validate.
//
// An -allow entry lets the function FUNC of FILE (a slash-separated path as the walk reports it)
// be LINES long: a function that was over the limit before the check may not grow while it waits
// to be split. An entry that is no longer needed, because the function is within -max or gone,
// fails the check too, so that the list only ever shrinks.
package main
