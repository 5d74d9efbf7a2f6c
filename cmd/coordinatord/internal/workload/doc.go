// Package workload generates the share-partition state writes the benchmarks send: each share
// partition holds a sliding window of StateBatches state batches, and each write acknowledges
// BatchesPerWrite new batches at the end of the window and moves the start offset past as many
// at its start, as a share-partition leader does while consumers make progress.
//
// Batches cover OffsetsPerBatch offsets each and alternate between the acknowledged and archived
// delivery states, so that neighbours never coalesce and a share partition's state (and so its
// snapshot) keeps exactly StateBatches batches once the window is full.
package workload
