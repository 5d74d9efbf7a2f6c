package groupcfg

import (
	"fmt"
	"strings"
)

// Kafka broker configs that are not coordinatord's: an operator who starts from a broker's
// server.properties gets one summary of them instead of one "unknown config" per key. The names
// are Kafka's broker configs (KafkaConfig and the classes it gathers, ZooKeeper-era names
// included, and Confluent's confluent.* additions): whole families by prefix, the rest by name.
// None of the prefixes starts a coordinatord key, so a misspelt coordinatord key is still
// reported as unknown. A key coordinatord defines is never looked up here.
var (
	kafkaBrokerPrefixes = []string{
		"add.partitions.to.txn.", "alter.log.dirs.replication.quota.", "broker.", "compression.", "confluent.",
		"connections.max.", "controlled.shutdown.", "controller.", "delegation.token.", "group.consumer.",
		"group.coordinator.", "group.streams.", "kafka.metrics.", "leader.imbalance.", "listener.name.", "log.",
		"max.connection", "metadata.", "num.", "offsets.", "password.encoder.", "producer.id.", "quota.",
		"remote.log.", "replica.", "replication.quota.", "sasl.", "share.fetch.", "socket.", "ssl.",
		"transaction.", "unclean.leader.election.", "zookeeper.",
	}
	kafkaBrokerNames = map[string]bool{
		"advertised.host.name": true, "advertised.listeners": true, "advertised.port": true,
		"alter.config.policy.class.name": true, "authorizer.class.name": true, "auto.create.topics.enable": true,
		"auto.include.jmx.reporter": true, "auto.leader.rebalance.enable": true, "background.threads": true,
		"client.quota.callback.class": true, "client.telemetry.max.bytes": true, "config.providers": true,
		"connection.failed.authentication.delay.ms": true, "control.plane.listener.name": true,
		"create.topic.policy.class.name": true, "default.replication.factor": true,
		"delete.records.purgatory.purge.interval.requests": true, "delete.topic.enable": true,
		"early.start.listeners": true, "eligible.leader.replicas.enable": true, "fetch.max.bytes": true,
		"fetch.purgatory.purge.interval.requests": true, "group.initial.rebalance.delay.ms": true,
		"group.max.session.timeout.ms": true, "group.max.size": true, "group.min.session.timeout.ms": true,
		"group.share.assignors": true, "group.share.enable": true, "group.share.initialize.retry.interval.ms": true,
		"group.share.max.groups": true, "group.share.max.share.sessions": true, "group.share.max.size": true,
		"group.share.persister.class.name": true, "host.name": true, "initial.broker.registration.timeout.ms": true,
		"inter.broker.listener.name": true, "inter.broker.protocol.version": true, "listener.security.protocol.map": true,
		"listeners": true, "max.incremental.fetch.session.cache.slots": true, "max.request.partition.size.limit": true,
		"message.max.bytes": true, "metric.reporters": true, "metrics.num.samples": true, "metrics.recording.level": true,
		"metrics.sample.window.ms": true, "min.insync.replicas": true, "node.id": true, "offset.metadata.max.bytes": true,
		"port": true, "principal.builder.class": true, "process.roles": true,
		"producer.purgatory.purge.interval.requests": true, "queued.max.request.bytes": true, "queued.max.requests": true,
		"remote.fetch.max.wait.ms": true, "remote.list.offsets.request.timeout.ms": true, "request.timeout.ms": true,
		"reserved.broker.max.id": true, "security.inter.broker.protocol": true, "security.providers": true,
		"server.max.startup.time.ms": true, "share.coordinator.cached.buffer.max.bytes": true,
		"share.coordinator.state.topic.compression.codec": true, "share.coordinator.state.topic.min.isr": true,
		"share.coordinator.threads": true, "telemetry.max.bytes": true, "transactional.id.expiration.ms": true,
		"unstable.api.versions.enable": true, "unstable.feature.versions.enable": true,
	}
	// kafkaReplacements say what takes the place of a Kafka broker key, for the keys that have a
	// counterpart here.
	kafkaReplacements = []struct{ key, use string }{
		{"node.id", "--node-id"}, {"broker.id", "--node-id"},
		{"listeners", "--listen"}, {"advertised.listeners", "--advertised-listen"},
		{"log.dirs", "--data-dir"}, {"log.dir", "--data-dir"},
		{"controller.quorum.voters", "--initial-cluster (cluster mode)"},
		{"controller.quorum.bootstrap.servers", "--initial-cluster (cluster mode)"},
		{"authorizer.class.name", "authorizer.enabled and the authorizer.*.principals lists"},
		{"ssl.", "the tls.* configs (PEM files)"},
	}
)

// isKafkaBrokerKey reports whether key is one of Kafka's broker configs.
func isKafkaBrokerKey(key string) bool {
	if kafkaBrokerNames[key] {
		return true
	}
	for _, p := range kafkaBrokerPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// kafkaKeysProblem is the one problem for every Kafka broker key that origin sets (keys, in the
// order given): it names them, and the flag or config that replaces those that have one.
func kafkaKeysProblem(keys []string, origin string) Problem {
	var hints []string
	seen := make(map[string]bool)
	for _, r := range kafkaReplacements {
		for _, k := range keys {
			if (k == r.key || strings.HasSuffix(r.key, ".") && strings.HasPrefix(k, r.key)) && !seen[r.key] {
				seen[r.key] = true
				name := k
				if strings.HasSuffix(r.key, ".") {
					name = r.key + "*"
				}
				hints = append(hints, name+": use "+r.use)
			}
		}
	}
	shown := make([]string, len(keys))
	for i, k := range keys {
		shown[i] = show(nil, k)
	}
	var msg string
	if len(keys) == 1 {
		msg = fmt.Sprintf("%s is a Kafka broker config that does not apply to a standalone share coordinator; remove it", shown[0])
	} else {
		msg = fmt.Sprintf("%d Kafka broker configs do not apply to a standalone share coordinator: %s; remove them", len(keys), strings.Join(shown, ", "))
	}
	msg += " and keep only the share-coordinator, share-group and server configs the README lists"
	if len(hints) > 0 {
		msg += " (" + strings.Join(hints, "; ") + ")"
	}
	return Problem{Source: origin, Message: msg}
}
