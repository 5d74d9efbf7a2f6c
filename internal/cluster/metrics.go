package cluster

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the cluster metrics of a node: counters and a histogram updated as things happen,
// and gauges read from the replicas at each scrape (collector).
type metrics struct {
	leaderChanges *prometheus.CounterVec
	proposals     *prometheus.HistogramVec
}

// ProposalBuckets bound the proposal latency histogram: 0.25 ms to about 4 s.
var ProposalBuckets = prometheus.ExponentialBuckets(0.00025, 2, 15)

func newMetrics(reg prometheus.Registerer, n *Node) *metrics {
	m := &metrics{
		leaderChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_raft_leader_changes_total",
			Help: "Changes of a state partition's leader seen by this node's replica (an election, a transfer, or its loss).",
		}, []string{"partition"}),
		proposals: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sharecoord_raft_proposal_seconds",
			Help:    "From proposing a group commit of a state partition to its commit on a majority and its apply on this node.",
			Buckets: ProposalBuckets,
		}, []string{"partition"}),
	}
	if reg != nil {
		reg.MustRegister(m.leaderChanges, m.proposals, &collector{n: n})
	}
	return m
}

var (
	descLeader = prometheus.NewDesc("sharecoord_raft_leader",
		"1 if this node leads the state partition and serves it, else 0.", []string{"partition"}, nil)
	descLeaderNode = prometheus.NewDesc("sharecoord_raft_leader_node",
		"The node id of the state partition's leader as this node knows it; 0: no leader (an election is under way).", []string{"partition"}, nil)
	descTerm = prometheus.NewDesc("sharecoord_raft_term",
		"The Raft term of the state partition's leadership this node last learned of.", []string{"partition"}, nil)
	descApplied = prometheus.NewDesc("sharecoord_raft_applied_index",
		"The Raft log index of the last entry of records this node's replica applied to its state log: the highest applied "+
			"index of the partition's replicas minus this one is how far this replica is behind.", []string{"partition"}, nil)
	descCaughtUp = prometheus.NewDesc("sharecoord_raft_caught_up",
		"1 once this node's replica has applied everything committed when it started, else 0.", []string{"partition"}, nil)
	descReplicaFailed = prometheus.NewDesc("sharecoord_raft_replica_failed",
		"1 if this node's replica of the state partition did not start (its log could not be opened), else 0.", []string{"partition"}, nil)
	descReplicas = prometheus.NewDesc("sharecoord_raft_replicas",
		"The number of replicas the state partition has (the replication factor, or the node count if smaller).", []string{"partition"}, nil)
	descPeerContact = prometheus.NewDesc("sharecoord_raft_peer_last_contact_seconds",
		"Seconds since this node last received a Raft message from the peer node; since this node started if it has not yet.",
		[]string{"node"}, nil)
)

// collector reads the replicas' state at each scrape.
type collector struct{ n *Node }

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLeader, descLeaderNode, descTerm, descApplied, descCaughtUp, descReplicaFailed,
		descReplicas, descPeerContact} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.collectPeers(ch)
	for _, p := range c.n.local() {
		label := strconv.Itoa(p.index)
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, label)
		}
		if p.failed != nil {
			gauge(descReplicaFailed, 1)
			continue
		}
		gauge(descReplicaFailed, 0)
		gauge(descReplicas, float64(len(live(c.n.replicasOf(p.index)))))
		r := p.Role()
		gauge(descLeader, boolValue(r.Leading))
		gauge(descLeaderNode, float64(r.Leader))
		gauge(descTerm, float64(r.Term))
		gauge(descCaughtUp, boolValue(p.CaughtUp()))
		gauge(descApplied, float64(p.sm.AppliedIndex()))
	}
}

// collectPeers reports how long ago each peer was heard from.
func (c *collector) collectPeers(ch chan<- prometheus.Metric) {
	for id, m := range c.n.memberList() {
		state, since := c.n.peerState(id, m.RaftAddress)
		if state == PeerSelf {
			continue
		}
		if since < 0 {
			since = time.Since(c.n.started)
		}
		ch <- prometheus.MustNewConstMetric(descPeerContact, prometheus.GaugeValue, since.Seconds(), strconv.FormatUint(id, 10))
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
