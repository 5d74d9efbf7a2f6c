// Package testcert makes up certificate authorities and certificates for tests: a CA per test,
// server certificates for 127.0.0.1 and localhost, client certificates for any subject, and
// their PEM encodings, written to files as certificate managers write them. Every key is a new
// ECDSA P-256 key; every certificate is valid from an hour ago for a day.
package testcert
