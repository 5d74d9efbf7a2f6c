// Package pmap is a persistent map from strings to values: a hash array mapped trie (Bagwell's
// HAMT) whose updates copy only the nodes on the path to the changed key. An update costs
// O(log₃₂ n) time and memory however many keys the map holds, and leaves every earlier version
// of the map as it was, so that readers may keep using a version while a writer derives the next
// one, without locks.
//
// A Map is a value: Set and Delete return a new Map. A Builder applies many updates to one
// version more cheaply, changing in place the nodes that it copied itself; the Map it returns is
// again immutable. Keys are hashed with hash/maphash under a seed chosen when the process starts,
// so that the shape of the trie cannot be steered by the keys; iteration order is therefore
// unspecified and differs between processes.
package pmap
