// Package sharecoordv1 is coordinatord's public API, sharecoord.v1: the generated Go code of the
// protobuf messages and gRPC services in the .proto files next to it (ShareCoordinatorService
// for the state RPCs, ConfigService for the admin RPCs, the ErrorCode enum whose values are
// Kafka's error codes), and request-shape validation shared by the server and the Go client.
// `make proto` regenerates the code; the .proto files are the contract.
package sharecoordv1
