// Package kafkaerr is the one definition of the Kafka error codes coordinatord answers with: each
// Code is Kafka's number, String is Kafka's name for it and DefaultMessage is the message Kafka
// sends with it when an error carries none of its own.
//
// The share-state machine (Result.Code), the config manager (admin results) and the gRPC service
// all use these codes, so a code is added here once and then means the same everywhere.
//
// # The API's enum
//
// The sharecoord.v1 ErrorCode enum of the API gives every code the same number, so the service
// turns a Code into the enum by a plain conversion, in one place (its errorCode). This package
// does not import the API's generated package to do that itself: that package carries
// the gRPC service stubs, and the share-state machine and the config manager, which import this
// one, know nothing of gRPC (cmd → service → shard → statelog; service and shard → groupcfg).
// Instead, this package's tests compare the two lists, number and name, both ways, so that a code
// added to one and not the other fails them.
package kafkaerr
