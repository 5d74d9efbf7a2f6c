package connlimit

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the connection metrics of every Listener given them.
type Metrics struct {
	open    *prometheus.GaugeVec
	refused *prometheus.CounterVec
}

// NewMetrics creates the connection metrics and registers them on reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sharecoord_connections_open",
			Help: "Connections held open, by listener (grpc, metrics, raft).",
		}, []string{"listener"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sharecoord_connections_refused_total",
			Help: "Client connections closed as soon as they were accepted, by listener and reason: max_connections (the port held its bound) or per_ip (the client's address held its own).",
		}, []string{"listener", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.open, m.refused)
	}
	return m
}
