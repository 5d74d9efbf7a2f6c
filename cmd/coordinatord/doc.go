// Command coordinatord is a standalone share coordinator: a gRPC service that durably stores the
// delivery state of Kafka share-group partitions (KIP-932).
//
// With no subcommand (or "serve") it runs the server; the other subcommands are operator tools
// (dump-log, check-config, repair-log) and benchmarks (bench). See README.md.
package main
