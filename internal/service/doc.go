// Package service implements coordinatord's gRPC API (package sharecoord.v1): the share-state
// RPCs of ShareCoordinatorService and the admin RPCs of ConfigService, plus the gRPC server they
// run in (interceptors, health, reflection).
//
// The state handlers check the request's shape (the validation interceptor, see
// sharecoordv1.*.Validate, and the per-request partition limit), split the request into one
// operation per (group, topic, partition) key, route each key to its state partition with
// Kafka's hash (Key.PartitionOf, shard.PartitionFor), run the keys of one request at once across
// partitions (a write queues every key on its partition from the handler's goroutine, then waits
// for their answers; the other methods run a goroutine per key), and gather the per-partition
// outcomes in request order, one topic result per topic id. The service knows nothing about
// files: durability is the partitions' business.
package service
