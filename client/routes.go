package client

import (
	"container/list"
	"slices"
	"sync"
)

// node is a coordinatord node as FindCoordinator names it.
type node struct {
	id   int32
	addr string // "host:port"
}

// routes is what the client knows of the cluster: the state partition of recently used
// coordinator keys (bounded, least recently used forgotten first) and the leader of each state
// partition. A key's state partition never changes (the server refuses to start with another
// partition count), so only leaders are ever invalidated. The leader map holds at most one entry
// per state partition, which the server bounds.
type routes struct {
	mu      sync.Mutex
	size    int
	keys    map[string]*list.Element // of *keyEntry
	lru     list.List                // front = most recently used
	leaders map[int32]node
	nodes   map[int32]string // every node id a FindCoordinator named, with its latest address
	lastOK  string           // the address that last answered a FindCoordinator naming every leader asked for
	// noLeader is the address whose latest FindCoordinator answer named no leader for some key:
	// it may be cut off from the others, which elected a leader it does not know of, so it is
	// asked last.
	noLeader string
}

type keyEntry struct {
	key       string
	partition int32
}

func newRoutes(size int) *routes {
	return &routes{size: size, keys: make(map[string]*list.Element), leaders: make(map[int32]node), nodes: make(map[int32]string)}
}

// partition returns the cached state partition of key.
func (r *routes) partition(key string) (int32, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok {
		return 0, false
	}
	r.lru.MoveToFront(e)
	return e.Value.(*keyEntry).partition, true
}

// leader returns the cached leader of a state partition.
func (r *routes) leader(partition int32) (node, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.leaders[partition]
	return n, ok
}

// learn records a FindCoordinator answer: key maps to partition, led by leader unless
// leader.addr is empty (no leader known).
func (r *routes) learn(key string, partition int32, leader node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.keys[key]; ok {
		e.Value.(*keyEntry).partition = partition
		r.lru.MoveToFront(e)
	} else {
		r.keys[key] = r.lru.PushFront(&keyEntry{key: key, partition: partition})
		for r.lru.Len() > r.size {
			oldest := r.lru.Back()
			r.lru.Remove(oldest)
			delete(r.keys, oldest.Value.(*keyEntry).key)
		}
	}
	if leader.addr == "" {
		delete(r.leaders, partition)
		return
	}
	r.leaders[partition] = leader
	r.nodes[leader.id] = leader.addr
}

// forget drops the leader of partition if it is still addr: an answer from a node that no longer
// leads must not undo a newer answer another call has already learnt.
func (r *routes) forget(partition int32, addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n, ok := r.leaders[partition]; ok && n.addr == addr {
		delete(r.leaders, partition)
	}
}

// answered records that addr answered a FindCoordinator; named: the answer named a leader for
// every key.
func (r *routes) answered(addr string, named bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if named {
		r.lastOK = addr
		if r.noLeader == addr {
			r.noLeader = ""
		}
		return
	}
	r.noLeader = addr
	if r.lastOK == addr {
		r.lastOK = ""
	}
}

// lookupOrder returns the addresses to ask FindCoordinator, in order: prefer (a node that just
// refused a key knows its new leader best), the node that last answered with every leader, the
// bootstrap addresses, then every other node a FindCoordinator named (by id), and last the node
// whose latest answer named no leader for some key; without repeats. During an election every
// node names none, and the node asked last changes with every answer.
func (r *routes) lookupOrder(prefer string, bootstrap []string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(bootstrap)+2)
	seen := make(map[string]bool, cap(out))
	add := func(a string) {
		if a != "" && !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	add(prefer)
	last := r.noLeader
	seen[last] = true // asked last, below
	add(r.lastOK)
	for _, a := range bootstrap {
		add(a)
	}
	ids := make([]int32, 0, len(r.nodes))
	for id := range r.nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		add(r.nodes[id])
	}
	if last != "" && last != prefer {
		out = append(out, last)
	}
	return out
}

// cachedKeys returns how many keys' state partitions are cached.
func (r *routes) cachedKeys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lru.Len()
}
