// Package client lets share-partition leaders call coordinatord as if it were one node: each
// state call is split by the node leading each key's state partition, sent to those nodes
// concurrently, retried on retriable errors until the call's deadline, and answered with exactly
// the response one node holding every partition would give.
//
// # Routing
//
// A key is a share partition, "groupId:topicId:partition" (see Key). Every key maps to one state
// partition, and in cluster mode each state partition is led by one node, the only one that
// serves its keys. The client learns both with FindCoordinator, asking the bootstrap nodes or any
// node it has heard of, and caches them: the state partition of the most recently used keys
// (Options.CacheSize) and the leader of every state partition. It never computes a key's state
// partition itself. It keeps one gRPC connection per node address, opened on first use. A node
// whose answer names no leader for some key is asked last the next time: it may be electing,
// but it may as well be cut off from the others, which elected a leader it has not heard of.
//
// A node that does not lead a key's state partition answers NOT_COORDINATOR. The client then
// forgets that leader, asks FindCoordinator again (first of the node that refused, whose view is
// the freshest) and sends only the refused partitions to the new leader, at once the first time
// and with backoff when redirects follow one another.
//
// # Retries
//
// Per-partition codes COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and
// REQUEST_TIMED_OUT, and requests to a node that fail with gRPC UNAVAILABLE or DEADLINE_EXCEEDED,
// are retried with exponential backoff and jitter (Options.RetryBackoff) until the call's
// context ends; a context without a deadline gets Options.CallTimeout. Writes are retried too,
// also when a message says the write may still be applied: share-state writes are safe to repeat
// and to reorder, as Kafka's share coordinator requires of them. Every other per-partition code
// (FENCED_STATE_EPOCH, INVALID_REQUEST, ...) is returned as the node gave it, never retried. A
// key that FindCoordinator refuses (its topic id does not parse, say) is sent nowhere and
// answered with FindCoordinator's code and message.
//
// When the deadline comes (or the next backoff would end after it) with partitions still failing
// retriably, the call returns its response with those partitions carrying their latest error:
// the last answer a node gave for them, COORDINATOR_NOT_AVAILABLE when their leader could not be
// reached, REQUEST_TIMED_OUT when it did not answer in time. A request the deadline cuts short
// does not replace an earlier error. Options.OnRetry and Client.Stats show the retries.
//
// # Coalescing
//
// ReadShareGroupState and WriteShareGroupState requests of one group to one node go through a
// lane, each method its own, as Kafka's share persister batches them per coordinator node, RPC
// type and group. A lane keeps one request outstanding; a call whose request finds it out waits,
// and when it returns, every request that waited meanwhile goes out as one, up to 500 partitions,
// each call getting exactly the answers its own partitions got. While the newest request out has
// taken twice the lane's smoothed round trip (at least a millisecond), what waits goes out in
// another, up to Options.InFlightPerNode (default DefaultInFlightPerNode): a request that a lossy
// link or a busy node stalls does not hold back the calls behind it. Before it takes them, the
// goroutine of the finished request yields the processor, and again as long as calls keep joining
// (a few times at most): the calls it just answered are runnable, and one that calls again at once
// joins this request instead of waiting for the whole next one. At one call in flight nothing
// waits, so coalescing costs nothing at low concurrency; under load one request carries many
// calls, and its cost (the RPC, its frames and syscalls, on the client and on the node) is paid
// once for all of them. Two calls naming the same partition never share a request (the later one
// goes in the next), and a call whose context carries outgoing gRPC metadata is always sent alone.
// A call whose context ends while it waits is never sent. The request of several calls is bounded
// by the latest of their deadlines. If a node refuses a coalesced request as too large
// (INVALID_ARGUMENT, as for a max.partitions.per.request lower than the request, or
// RESOURCE_EXHAUSTED), each call's part is sent again alone and the lane keeps its requests to at
// most half that size from then on. Stats.Coalesced counts the calls' requests that went out
// together with others.
//
// # Errors
//
// A call returns a Go error only when it fails as a whole: a malformed request
// (INVALID_ARGUMENT, as the server would answer, sent nowhere), a gRPC status other than
// UNAVAILABLE or DEADLINE_EXCEEDED from any node (PERMISSION_DENIED, UNAUTHENTICATED,
// INVALID_ARGUMENT, ...: that status error, unchanged), no node reachable during the whole call
// (UNAVAILABLE), a context that ends before anything was sent (its CANCELED or DEADLINE_EXCEEDED
// status), or a closed client (ErrClosed).
//
// A request that names more partitions than a node accepts per request may pass when its
// partitions are spread over several leaders, since each node sees only its share.
package client
