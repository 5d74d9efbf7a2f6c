package groupcfg

import (
	"math"
	"slices"

	"github.com/coordinatord/coordinatord/internal/connlimit"
	"github.com/coordinatord/coordinatord/internal/principal"
)

// Key names the code refers to. The table below is the authority on every key.
const (
	keyNumPartitions        = "share.coordinator.state.topic.num.partitions"
	keyReplicationFactor    = "share.coordinator.state.topic.replication.factor"
	keySegmentBytes         = "share.coordinator.state.topic.segment.bytes"
	keySnapshotCeiling      = "share.coordinator.snapshot.update.records.per.snapshot"
	keyAppendLingerMs       = "share.coordinator.append.linger.ms"
	keyWriteTimeoutMs       = "share.coordinator.write.timeout.ms"
	keyLoadBufferSize       = "share.coordinator.load.buffer.size"
	keyPruneIntervalMs      = "share.coordinator.state.topic.prune.interval.ms"
	keyColdSnapshotInterval = "share.coordinator.cold.partition.snapshot.interval.ms"

	keyBrokerSessionTimeout       = "group.share.session.timeout.ms"
	keyBrokerMinSessionTimeout    = "group.share.min.session.timeout.ms"
	keyBrokerMaxSessionTimeout    = "group.share.max.session.timeout.ms"
	keyBrokerHeartbeatInterval    = "group.share.heartbeat.interval.ms"
	keyBrokerMinHeartbeatInterval = "group.share.min.heartbeat.interval.ms"
	keyBrokerMaxHeartbeatInterval = "group.share.max.heartbeat.interval.ms"
	keyBrokerRecordLockDuration   = "group.share.record.lock.duration.ms"
	keyBrokerMinRecordLock        = "group.share.min.record.lock.duration.ms"
	keyBrokerMaxRecordLock        = "group.share.max.record.lock.duration.ms"
	keyBrokerDeliveryCountLimit   = "group.share.delivery.count.limit"
	keyBrokerMinDeliveryCount     = "group.share.min.delivery.count.limit"
	keyBrokerMaxDeliveryCount     = "group.share.max.delivery.count.limit"
	keyBrokerRecordLocks          = "group.share.partition.max.record.locks"
	keyBrokerMinRecordLocks       = "group.share.min.partition.max.record.locks"
	keyBrokerMaxRecordLocks       = "group.share.max.partition.max.record.locks"
	keyBrokerAssignmentInterval   = "group.share.assignment.interval.ms"
	keyBrokerMinAssignment        = "group.share.min.assignment.interval.ms"
	keyBrokerMaxAssignment        = "group.share.max.assignment.interval.ms"
	keyBrokerAssignorOffload      = "group.share.assignor.offload.enable"

	keyMaxPartitionsPerRequest = "max.partitions.per.request"
	keyMaxAlterConfigResources = "max.alter.config.resources.per.request"
	keyGRPCMaxRecvMessageBytes = "grpc.max.recv.message.bytes"
	keyGRPCMaxConcurrentStream = "grpc.max.concurrent.streams"
	keyGRPCMaxConnections      = "grpc.max.connections"
	keyGRPCKeepaliveMinTimeMs  = "grpc.keepalive.min.time.ms"
	keyGRPCKeepaliveTimeMs     = "grpc.keepalive.time.ms"
	keyGRPCKeepaliveTimeoutMs  = "grpc.keepalive.timeout.ms"
	keyShutdownDrainTimeoutMs  = "shutdown.drain.timeout.ms"
	keyMetricsGroupLabelMax    = "metrics.group.label.max"

	keyMaxConnectionsPerIP      = "max.connections.per.ip"
	keyMaxConnectionsPerIPOver  = "max.connections.per.ip.overrides"
	keyConnectionsMaxIdleMs     = "connections.max.idle.ms"
	keyHandshakeTimeoutMs       = "connections.handshake.timeout.ms"
	keySendTimeoutMs            = "connections.send.timeout.ms"
	keyGRPCMaxPendingResponse   = "grpc.max.pending.response.bytes"
	keyMetricsMaxConnections    = "metrics.max.connections"
	keyMetricsMaxConnectionsPer = "metrics.max.connections.per.ip"
	keyRaftMaxConnections       = "raft.max.connections"
	keyMemoryLimitBytes         = "memory.limit.bytes"

	keySessionTimeout      = "share.session.timeout.ms"
	keyHeartbeatInterval   = "share.heartbeat.interval.ms"
	keyRecordLockDuration  = "share.record.lock.duration.ms"
	keyDeliveryCountLimit  = "share.delivery.count.limit"
	keyRecordLocks         = "share.partition.max.record.locks"
	keyRenewAcknowledge    = "share.renew.acknowledge.enable"
	keyAutoOffsetReset     = "share.auto.offset.reset"
	keyIsolationLevel      = "share.isolation.level"
	keyAssignmentInterval  = "share.assignment.interval.ms"
	keyAssignorOffload     = "share.assignor.offload.enable"
	keyDeadLetterTopicName = "errors.deadletterqueue.topic.name"
	keyDeadLetterCopy      = "errors.deadletterqueue.copy.record.enable"
	keyGroupSnapshotLimit  = "share.snapshot.update.records.per.snapshot"
)

// Security keys: coordinatord server keys read by the server's wiring (TLS listeners and the
// authorizer). The cross-checks between them are made where they are used, at start-up.
const (
	KeyTLSEnabled                = "tls.enabled"
	KeyTLSCertFile               = "tls.cert.file"
	KeyTLSKeyFile                = "tls.key.file"
	KeyTLSClientCAFile           = "tls.client.ca.file"
	KeyTLSClientAuth             = "tls.client.auth"
	KeyTLSMinVersion             = "tls.min.version"
	KeyTLSPeerCAFile             = "tls.peer.ca.file"
	KeyMetricsTLSEnabled         = "metrics.tls.enabled"
	KeyAuthorizerEnabled         = "authorizer.enabled"
	KeyAuthorizerClusterAction   = "authorizer.cluster.action.principals"
	KeyAuthorizerAlterConfigs    = "authorizer.alter.configs.principals"
	KeyAuthorizerDescribeConfigs = "authorizer.describe.configs.principals"
	KeyAuthorizerAlterCluster    = "authorizer.alter.cluster.principals"
)

// KeyStateLogSync is the server key that chooses how state-log appends are made durable.
const KeyStateLogSync = "state.log.sync"

// KeyNumPartitions is the broker key for the number of state partitions, which must not change
// once a data directory holds state.
const KeyNumPartitions = keyNumPartitions

// Values of state.log.sync.
const (
	// StateLogSyncFile makes each append durable with an fdatasync of its log file.
	StateLogSyncFile = "file"
	// StateLogSyncFileSystem makes the appends of all state partitions durable together with
	// one syncfs(2) of the data directory's file system per group-commit round.
	StateLogSyncFileSystem = "filesystem"
	// StateLogSyncJournal makes the appends of all state partitions durable together in one
	// journal file, with one write and one fdatasync per round (package journal).
	StateLogSyncJournal = "journal"
)

// Values of tls.client.auth (Kafka's ssl.client.auth values).
const (
	ClientAuthNone      = "none"
	ClientAuthRequested = "requested"
	ClientAuthRequired  = "required"
)

// principalsRule is the validator of the authorizer.*.principals keys: lists as principal.ParseList
// reads them.
func principalsRule() Rule {
	return Rule{Desc: `"*" (or "User:*") or principals "User:<subject DN>", separated by ";"`, Check: func(text string) error {
		_, err := principal.ParseList(text)
		return err
	}}
}

// maxDurationMs bounds the millisecond keys of type LONG: 2^31-1 ms, about 24.8 days, which is
// "never" for each of them. Larger values overflow where gRPC adds them to the clock or passes
// them to the kernel (TCP_USER_TIMEOUT takes a C int of milliseconds).
const maxDurationMs = math.MaxInt32

// snapshotFloor is the smallest snapshot limit coordinatord accepts, broker-wide or per group.
const snapshotFloor = 200

// Definitions returns the table of every config key, a fresh copy on each call: the
// share.coordinator.* keys of a standalone share coordinator, the group.share.* broker defaults
// and bounds of the share-group configs, coordinatord's own server keys (Server), and the
// share-group configs that are set per group (ScopeGroup). Names, types, defaults and bounds
// follow Kafka except where a Doc says otherwise.
//
// The table is written in parts, one per area of keys, so that each reads on its own; the order
// of the parts is the order of the table, in which the README's config table and a
// DescribeConfigs that names no keys list them.
func Definitions() []Definition {
	return slices.Concat(
		shareCoordinatorDefinitions(),
		groupShareMembershipDefinitions(),
		groupShareDeliveryDefinitions(),
		groupShareAssignmentDefinitions(),
		serverDefinitions(),
		resourceDefinitions(),
		securityDefinitions(),
		groupDefinitions(),
	)
}

// shareCoordinatorDefinitions are the share.coordinator.* keys (Kafka's ShareCoordinatorConfig)
// that apply to a standalone service: the state logs' layout, durability and upkeep.
func shareCoordinatorDefinitions() []Definition {
	return []Definition{
		{
			Name: keyNumPartitions, Type: TypeInt, Default: "50", Validator: Between(1, 10000),
			Importance: ImportanceHigh, Scope: ScopeBroker,
			Doc: "The number of partitions for the share-group state topic (should not change after deployment). " +
				"Every share-partition key is routed by hash to one of them. coordinatord records the value in the data " +
				"directory on first start and refuses to start with a different value, because routing would silently move keys.",
		},
		{
			Name: keyReplicationFactor, Type: TypeInt, Default: "3", Validator: Between(1, 7),
			Importance: ImportanceHigh, Scope: ScopeBroker,
			Doc: "The number of replicas of each state partition in cluster mode (--initial-cluster): each partition is a Raft " +
				"group on that many nodes, so it goes on serving while a minority of them is lost. A cluster of fewer nodes " +
				"replicates every partition on all of them. It decides where the replicas of a new cluster go and should not " +
				"change after deployment. Ignored by a single node.",
		},
		{
			Name: keySegmentBytes, Type: TypeInt, Default: "104857600", Validator: AtLeast(1 << 20),
			Importance: ImportanceHigh, Scope: ScopeBroker,
			Doc: "The log segment size for the share-group state topic: a state log starts a new segment file when the " +
				"active one would grow past it. coordinatord requires at least 1 MiB (Kafka accepts 1 byte): a standalone " +
				"log with tiny segments only multiplies files, open handles and directory fsyncs.",
		},
		{
			Name: keySnapshotCeiling, Type: TypeInt, Default: "500", Validator: Between(snapshotFloor, 1000),
			Importance: ImportanceMedium, Scope: ScopeBroker, Dynamic: true,
			Migration: "values below 200 are no longer supported",
			Doc: "The number of update records the share coordinator writes between snapshot records, applied as a ceiling " +
				"across all share groups: a group may choose a lower value with share.snapshot.update.records.per.snapshot. " +
				"Must be in [200, 1000]; values below 200 (including the formerly documented 0) stop start-up. A high value " +
				"stalls pruning of busy state partitions and lengthens replay on start; a low value writes large snapshots " +
				"often. Alterable at run time on the BROKER resource; lowering it does not re-validate group overrides, whose " +
				"effective value is clamped to it instead.",
		},
		{
			Name: keyAppendLingerMs, Type: TypeInt, Default: "-1", Validator: AtLeast(-1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The duration in milliseconds that the share coordinator will wait for writes to accumulate before flushing " +
				"them to disk. Set to -1 for an adaptive linger time that minimizes latency based on the workload; 0 flushes " +
				"(fsyncs) after every operation.",
		},
		{
			Name: keyWriteTimeoutMs, Type: TypeInt, Default: "5000", Validator: AtLeast(1),
			Importance: ImportanceHigh, Scope: ScopeBroker,
			Doc: "The duration in milliseconds that the share coordinator will wait for a write to become durable (written " +
				"and fsynced). A write that takes longer is answered with COORDINATOR_NOT_AVAILABLE and stays applied.",
		},
		{
			Name: keyLoadBufferSize, Type: TypeInt, Default: "5242880", Validator: AtLeast(1),
			Importance: ImportanceHigh, Scope: ScopeBroker,
			Doc: "Batch size in bytes for reading a state log when loading state information into memory on start " +
				"(soft-limit, overridden if records are too large). coordinatord reads at most 1 MiB at a time " +
				"whatever the value: larger reads leave the cache before they are decoded.",
		},
		{
			Name: keyPruneIntervalMs, Type: TypeInt, Default: "300000", Validator: AtLeast(1),
			Importance: ImportanceLow, Scope: ScopeBroker, Internal: true,
			Doc: "The duration in milliseconds that the share coordinator will wait between pruning eligible records in " +
				"share-group state logs.",
		},
		{
			Name: keyColdSnapshotInterval, Type: TypeInt, Default: "300000", Validator: AtLeast(1),
			Importance: ImportanceLow, Scope: ScopeBroker, Internal: true,
			Doc: "The duration in milliseconds that the share coordinator will wait between force snapshotting share " +
				"partitions which are not being updated.",
		},
	}
}

// groupShareMembershipDefinitions are the group.share.* broker keys (Kafka's
// GroupCoordinatorConfig) for member liveness: the defaults and bounds that
// share.session.timeout.ms and share.heartbeat.interval.ms name as Synonym, MinKey and MaxKey.
// Static.
func groupShareMembershipDefinitions() []Definition {
	return []Definition{
		{
			Name: keyBrokerSessionTimeout, Type: TypeInt, Default: "45000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The timeout to detect client failures when using the share group protocol; the default of " +
				"share.session.timeout.ms.",
		},
		{
			Name: keyBrokerMinSessionTimeout, Type: TypeInt, Default: "45000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum allowed session timeout for share group members (lower bound of share.session.timeout.ms).",
		},
		{
			Name: keyBrokerMaxSessionTimeout, Type: TypeInt, Default: "60000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum allowed session timeout for share group members (upper bound of share.session.timeout.ms).",
		},
		{
			Name: keyBrokerHeartbeatInterval, Type: TypeInt, Default: "5000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The heartbeat interval given to the members of a share group; the default of share.heartbeat.interval.ms. " +
				"Must be less than group.share.session.timeout.ms.",
		},
		{
			Name: keyBrokerMinHeartbeatInterval, Type: TypeInt, Default: "5000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum heartbeat interval for share group members (lower bound of share.heartbeat.interval.ms).",
		},
		{
			Name: keyBrokerMaxHeartbeatInterval, Type: TypeInt, Default: "15000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum heartbeat interval for share group members (upper bound of share.heartbeat.interval.ms).",
		},
	}
}

// groupShareDeliveryDefinitions are the group.share.* broker keys (Kafka's ShareGroupConfig)
// for record delivery: the defaults and bounds of the group's record lock duration, delivery
// count limit and record lock limit. Static.
func groupShareDeliveryDefinitions() []Definition {
	return []Definition{
		{
			Name: keyBrokerRecordLockDuration, Type: TypeInt, Default: "30000", Validator: Between(1000, 3600000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The record acquisition lock duration in milliseconds for share groups; the default of " +
				"share.record.lock.duration.ms.",
		},
		{
			Name: keyBrokerMinRecordLock, Type: TypeInt, Default: "15000", Validator: Between(1000, 30000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum value of a group configuration for record acquisition lock duration in milliseconds " +
				"(lower bound of share.record.lock.duration.ms).",
		},
		{
			Name: keyBrokerMaxRecordLock, Type: TypeInt, Default: "60000", Validator: Between(30000, 3600000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum value of a group configuration for record acquisition lock duration in milliseconds " +
				"(upper bound of share.record.lock.duration.ms).",
		},
		{
			Name: keyBrokerDeliveryCountLimit, Type: TypeInt, Default: "5", Validator: Between(2, 10),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum number of delivery attempts for a record delivered to a share group; the default of " +
				"share.delivery.count.limit.",
		},
		{
			Name: keyBrokerMinDeliveryCount, Type: TypeInt, Default: "2", Validator: Between(2, 5),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum value of a group configuration for the maximum number of delivery attempts for a record " +
				"delivered to a share group (lower bound of share.delivery.count.limit).",
		},
		{
			Name: keyBrokerMaxDeliveryCount, Type: TypeInt, Default: "10", Validator: Between(5, 25),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum value of a group configuration for the maximum number of delivery attempts for a record " +
				"delivered to a share group (upper bound of share.delivery.count.limit).",
		},
		{
			Name: keyBrokerRecordLocks, Type: TypeInt, Default: "2000", Validator: Between(100, 10000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "Share-group record lock limit per share-partition; the default of share.partition.max.record.locks.",
		},
		{
			Name: keyBrokerMinRecordLocks, Type: TypeInt, Default: "100", Validator: Between(100, 2000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum value of a group configuration for the record lock limit per share-partition (lower bound " +
				"of share.partition.max.record.locks).",
		},
		{
			Name: keyBrokerMaxRecordLocks, Type: TypeInt, Default: "4000", Validator: Between(2000, 10000),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum value of a group configuration for the record lock limit per share-partition (upper bound " +
				"of share.partition.max.record.locks).",
		},
	}
}

// groupShareAssignmentDefinitions are the group.share.* broker keys (Kafka's
// GroupCoordinatorConfig) for assignment: the defaults and bounds of share.assignment.interval.ms
// and the default of share.assignor.offload.enable. Static.
func groupShareAssignmentDefinitions() []Definition {
	return []Definition{
		{
			Name: keyBrokerAssignmentInterval, Type: TypeInt, Default: "1000", Validator: AtLeast(0),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The interval between assignment updates for a share group, in milliseconds; the default of " +
				"share.assignment.interval.ms.",
		},
		{
			Name: keyBrokerMinAssignment, Type: TypeInt, Default: "0", Validator: AtLeast(0),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The minimum interval between assignment updates for a share group (lower bound of " +
				"share.assignment.interval.ms).",
		},
		{
			Name: keyBrokerMaxAssignment, Type: TypeInt, Default: "15000", Validator: AtLeast(0),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The maximum interval between assignment updates for a share group (upper bound of " +
				"share.assignment.interval.ms).",
		},
		{
			Name: keyBrokerAssignorOffload, Type: TypeBoolean, Default: "true",
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "Whether to offload share group assignment to a group coordinator background thread; the default of " +
				"share.assignor.offload.enable.",
		},
	}
}

// serverDefinitions are coordinatord's own server keys, which have no Kafka counterpart: request
// and connection limits of the gRPC port, shutdown, durability mode and metrics. Static.
func serverDefinitions() []Definition {
	return []Definition{
		{
			Name: keyMaxPartitionsPerRequest, Type: TypeInt, Default: "5000", Validator: Between(1, 100000),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The most share partitions one state RPC (Initialize, Read, Write, Delete, ReadSummary) may carry; " +
				"larger requests are refused.",
		},
		{
			Name: keyMaxAlterConfigResources, Type: TypeInt, Default: "10000", Validator: Between(1, 100000),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The most resources one IncrementalAlterConfigs request may change; larger requests are refused " +
				"(INVALID_ARGUMENT) and change nothing. Changes are applied one request at a time, so the bound also " +
				"bounds how long a request waits for the one before it. Kafka has no such bound.",
		},
		{
			Name: keyGRPCMaxRecvMessageBytes, Type: TypeInt, Default: "16777216", Validator: Between(1024, 268435456),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The largest gRPC request message the server accepts, in bytes.",
		},
		{
			Name: keyGRPCMaxConcurrentStream, Type: TypeInt, Default: "1024", Validator: Between(1, 1000000),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The most concurrent gRPC streams (in-flight RPCs) per client connection.",
		},
		{
			Name: keyGRPCMaxConnections, Type: TypeInt, Default: "4096", Validator: Between(1, 1000000),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The most client connections the gRPC port holds open at once. A further one is closed as soon as " +
				"it is accepted (counted in sharecoord_connections_refused_total, warned of), so that connections " +
				"alone, idle ones included, cannot use up the file descriptors that the state logs need; it is " +
				"lowered at start, with a warning, when the file descriptor limit (ulimit -n) would not leave them theirs.",
		},
		{
			Name: keyGRPCKeepaliveMinTimeMs, Type: TypeLong, Default: "10000", Validator: Between(0, maxDurationMs),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "Keepalive enforcement: the shortest interval in milliseconds at which a client may send keepalive " +
				"pings; a client that pings more often is disconnected. 0 allows any interval.",
		},
		{
			Name: keyGRPCKeepaliveTimeMs, Type: TypeLong, Default: "60000", Validator: Between(1000, maxDurationMs),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "The server pings a client connection that has been idle this long, in milliseconds, to check that it " +
				"is alive (gRPC does not ping more often than once a second).",
		},
		{
			Name: keyGRPCKeepaliveTimeoutMs, Type: TypeLong, Default: "20000", Validator: Between(1, maxDurationMs),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "After a keepalive ping, the time in milliseconds the server waits for any activity before it closes " +
				"the connection.",
		},
		{
			Name: keyShutdownDrainTimeoutMs, Type: TypeLong, Default: "20000", Validator: Between(0, maxDurationMs),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "On shutdown, the time in milliseconds in-flight RPCs may take to finish before they are cancelled.",
		},
		{
			Name: KeyStateLogSync, Type: TypeString, Default: StateLogSyncJournal,
			Validator:  OneOf{StateLogSyncJournal, StateLogSyncFile, StateLogSyncFileSystem},
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "How a write is made durable on a single node (a cluster node's Raft log does it there). journal: the " +
				"write's records also go to one journal file that every state partition shares, made durable with one " +
				"write and one fdatasync per group-commit round for all of them; each partition's log is synced every " +
				"10 s, and after a crash the journal's records are appended again to the logs before they load. file: an " +
				"fdatasync of the state partition's log file, so with writes spread over many state partitions nearly " +
				"every write pays its own sync. filesystem: one syncfs(2) of the data directory's file system per " +
				"group-commit round; syncfs also writes back any other dirty data on that file system, so use it only on " +
				"a dedicated volume; it needs Linux 5.8 or later (start-up fails otherwise). A failed journal write or " +
				"sync, or a failed syncfs, fails every state partition until the process is restarted.",
		},
		{
			Name: keyMetricsGroupLabelMax, Type: TypeInt, Default: "100", Validator: Between(0, 100000),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "The most share groups that get their own group label value on per-group metrics; records of further " +
				"groups are counted under group=\"__other__\" (0 counts every group there), as are group ids longer than 255 bytes or " +
				"holding control characters.",
		},
	}
}

// resourceDefinitions bound what clients can make the process hold: connections on each port,
// per client address, idle or still handshaking, and the bytes of read responses; and the Go
// runtime's memory limit. Kafka's names where Kafka has the setting. Static.
func resourceDefinitions() []Definition {
	return []Definition{
		{
			Name: keyMaxConnectionsPerIP, Type: TypeInt, Default: "1024", Validator: Between(1, math.MaxInt32),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "The most connections the gRPC port holds open from one IP address; a further one is closed as soon as " +
				"it is accepted (counted in sharecoord_connections_refused_total, warned of), so that one client cannot " +
				"take all of grpc.max.connections. Kafka's default is unbounded; coordinatord's is a quarter of " +
				"grpc.max.connections. Behind a proxy or service mesh that connects from one address, raise it or name " +
				"that address in max.connections.per.ip.overrides.",
		},
		{
			Name: keyMaxConnectionsPerIPOver, Type: TypeString, Default: "",
			Validator: Rule{Desc: `"ADDRESS:COUNT,..." (IP addresses)`, Check: func(text string) error {
				_, err := connlimit.ParseOverrides(text)
				return err
			}},
			Importance: ImportanceLow, Scope: ScopeBroker,
			Doc: "Per-address exceptions to max.connections.per.ip on the gRPC port, as a comma-separated list of " +
				"ADDRESS:COUNT, e.g. \"127.0.0.1:200,[::1]:10\"; a count of 0 refuses the address. Unlike Kafka, " +
				"coordinatord takes IP addresses only, not host names.",
		},
		{
			Name: keyConnectionsMaxIdleMs, Type: TypeLong, Default: "600000", Validator: Between(1, maxDurationMs),
			Importance: ImportanceMedium, Scope: ScopeBroker,
			Doc: "Idle connections timeout: a gRPC connection with no call in flight for this long, in milliseconds, " +
				"is closed with a GOAWAY (clients reconnect when they next call; keepalive pings do not count as " +
				"calls), and so is a metrics connection with no request.",
		},
		{
			Name: keyHandshakeTimeoutMs, Type: TypeLong, Default: "5000", Validator: Between(1, maxDurationMs),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "How long, in milliseconds, a new connection may take to complete its TLS handshake and HTTP/2 " +
				"preface on the gRPC port, or to send its request headers on the metrics port, before it is closed: " +
				"connections that send nothing hold a place of grpc.max.connections no longer than this.",
		},
		{
			Name: keySendTimeoutMs, Type: TypeLong, Default: "10000", Validator: Between(1, maxDurationMs),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "How long, in milliseconds, a read response may wait to be sent once it is ready, and a write to a " +
				"client's socket may block, on either port. A client that does not read its responses (or does not " +
				"open its HTTP/2 flow-control window) then has its connection closed, which frees what its responses held.",
		},
		{
			Name: keyGRPCMaxPendingResponse, Type: TypeLong, Default: "134217728", Validator: Between(1<<20, 1<<40),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The most bytes of state batches that ReadShareGroupState responses hold at once, from the moment they " +
				"are encoded until they are sent (each response counts twice its batches while it is built, once while " +
				"it waits to be sent). A read that finds no room waits up to 500 ms, then its partition is answered " +
				"COORDINATOR_NOT_AVAILABLE (share-partition leaders retry it). One response larger than the bound is " +
				"sent alone.",
		},
		{
			Name: keyRaftMaxConnections, Type: TypeInt, Default: "128", Validator: Between(8, 65536),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "Cluster mode: the most connections the replication port (--raft-listen) holds open at once, and a " +
				"quarter of it from one IP address; a further one is closed as soon as it is accepted. Each peer holds one, " +
				"and one more per snapshot it sends. Its connections have the handshake, idle and send timeouts of the " +
				"gRPC port (connections.*.ms).",
		},
		{
			Name: keyMetricsMaxConnections, Type: TypeInt, Default: "64", Validator: Between(1, 1000000),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "The most connections the metrics port (/metrics, /healthz, /readyz) holds open at once; a further one " +
				"is closed as soon as it is accepted. Prometheus and the kubelet's probes need a few.",
		},
		{
			Name: keyMetricsMaxConnectionsPer, Type: TypeInt, Default: "8", Validator: Between(1, 1000000),
			Importance: ImportanceLow, Scope: ScopeBroker, Server: true,
			Doc: "The most connections the metrics port holds open from one IP address, so that one client cannot lock " +
				"out the probes and Prometheus.",
		},
		{
			Name: keyMemoryLimitBytes, Type: TypeLong, Default: "0", Validator: Between(0, math.MaxInt64),
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The Go runtime's soft memory limit in bytes, towards which it collects harder (as GOMEMLIMIT). 0 (the " +
				"default): the GOMEMLIMIT environment variable when set, else 90 % of the memory limit of the process's " +
				"cgroup (a container's memory limit) when it has one, else none. The limit in force is logged at start.",
		},
	}
}

// securityDefinitions are coordinatord's security keys: TLS for the gRPC and metrics ports, and
// authorization of the RPCs by client-certificate principal. Static; the files are re-read when
// they change.
func securityDefinitions() []Definition {
	return []Definition{
		{
			Name: KeyTLSEnabled, Type: TypeBoolean, Default: "false",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "Serve gRPC over TLS with the certificate of tls.cert.file and tls.key.file. Off, gRPC is plaintext " +
				"and clients are not authenticated.",
		},
		{
			Name: KeyTLSCertFile, Type: TypeString, Default: "",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "PEM file with the server certificate, followed by any intermediate CA certificates. Required when " +
				"tls.enabled=true. Re-read without a restart when the file changes (checked on each new connection) " +
				"or on SIGHUP; a replacement that does not load, or is expired or not yet valid, is logged and the " +
				"previous certificate stays in use (one not yet valid is used from its start on). An expired or not " +
				"yet valid certificate stops start-up (exit status 2).",
		},
		{
			Name: KeyTLSKeyFile, Type: TypeString, Default: "",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "PEM file with the private key of tls.cert.file (unencrypted PKCS #1, PKCS #8 or EC). Required when " +
				"tls.enabled=true; reloaded together with the certificate.",
		},
		{
			Name: KeyTLSClientCAFile, Type: TypeString, Default: "",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "PEM file with the CA certificates that sign client certificates (mutual TLS). Required when " +
				"tls.client.auth is requested or required; reloaded when it changes.",
		},
		{
			Name: KeyTLSClientAuth, Type: TypeString, Default: ClientAuthNone,
			Validator:  OneOf{ClientAuthNone, ClientAuthRequested, ClientAuthRequired},
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "Client authentication on the gRPC port, as Kafka's ssl.client.auth: required (a client certificate " +
				"signed by tls.client.ca.file is needed to connect), requested (asked for and verified if presented; " +
				"clients without one connect unauthenticated) or none. A verified client certificate makes the " +
				"client's principal \"User:\" + its subject DN in RFC 2253 form, e.g. User:CN=broker-1,O=Acme.",
		},
		{
			Name: KeyTLSPeerCAFile, Type: TypeString, Default: "",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "Cluster mode: PEM file with the CA certificates that sign the nodes' certificates. With tls.enabled=true " +
				"(which cluster mode then requires it for) the replication port (--raft-listen) is mutual TLS: each node " +
				"presents tls.cert.file (it needs both the serverAuth and the clientAuth extended key usage, and the host of " +
				"its replication address among its names) and accepts only peers whose certificate this CA signs, so a " +
				"process without one can neither join nor send a Raft message. Read at start and on SIGHUP.",
		},
		{
			Name: KeyTLSMinVersion, Type: TypeString, Default: "TLSv1.2",
			Validator:  OneOf{"TLSv1.2", "TLSv1.3"},
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "The oldest TLS version the gRPC and metrics ports accept.",
		},
		{
			Name: KeyMetricsTLSEnabled, Type: TypeBoolean, Default: "false",
			Importance: ImportanceMedium, Scope: ScopeBroker, Server: true,
			Doc: "Serve /metrics, /healthz and /readyz over HTTPS with the gRPC port's certificate (needs " +
				"tls.enabled=true). Client certificates are not asked for on this port, so that Kubernetes probes " +
				"(which present none) keep working; it serves nothing that changes state.",
		},
		{
			Name: KeyAuthorizerEnabled, Type: TypeBoolean, Default: "false",
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "Authorize every RPC by the client's principal: the state RPCs and FindCoordinator need the " +
				"cluster_action permission, IncrementalAlterConfigs alter_configs and DescribeConfigs describe_configs " +
				"(Kafka's ACL operations for these requests), granted by the authorizer.*.principals lists. A call " +
				"without a verified client certificate gets UNAUTHENTICATED, a principal without the permission " +
				"PERMISSION_DENIED (both logged). Health checks and server reflection need no permission. Needs " +
				"tls.enabled=true and tls.client.auth requested or required.",
		},
		{
			Name: KeyAuthorizerClusterAction, Type: TypeString, Default: "", Validator: principalsRule(),
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "The principals allowed the cluster_action permission (the share-state RPCs and FindCoordinator), " +
				"separated by semicolons, e.g. \"User:CN=broker-1,O=Acme;User:CN=broker-2,O=Acme\"; * (or Kafka's User:*) " +
				"allows every authenticated client. Empty allows nobody. Needs authorizer.enabled=true.",
		},
		{
			Name: KeyAuthorizerAlterConfigs, Type: TypeString, Default: "", Validator: principalsRule(),
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "The principals allowed the alter_configs permission (IncrementalAlterConfigs), as in " +
				"authorizer.cluster.action.principals. Empty allows nobody. Needs authorizer.enabled=true.",
		},
		{
			Name: KeyAuthorizerDescribeConfigs, Type: TypeString, Default: "", Validator: principalsRule(),
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "The principals allowed the describe_configs permission (DescribeConfigs), as in " +
				"authorizer.cluster.action.principals. Empty allows nobody. Needs authorizer.enabled=true.",
		},
		{
			Name: KeyAuthorizerAlterCluster, Type: TypeString, Default: "", Validator: principalsRule(),
			Importance: ImportanceHigh, Scope: ScopeBroker, Server: true,
			Doc: "The principals allowed the alter_cluster permission (ClusterService.TransferLeader, AddNode, RemoveNode and ImportRecords; nodes started with --join call AddNode; Kafka's alter on " +
				"the cluster), as in authorizer.cluster.action.principals. Empty allows nobody. Needs authorizer.enabled=true.",
		},
	}
}

// groupDefinitions are the share-group configs (Kafka's GroupConfig), set per group with
// IncrementalAlterConfigs on a GROUP resource. Unset ones inherit their Synonym's value in force.
func groupDefinitions() []Definition {
	return []Definition{
		{
			Name: keySessionTimeout, Type: TypeInt, Default: "45000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerSessionTimeout, MinKey: keyBrokerMinSessionTimeout, MaxKey: keyBrokerMaxSessionTimeout,
			Doc: "The timeout to detect client failures when using the share group protocol. Must be greater than " +
				"share.heartbeat.interval.ms.",
		},
		{
			Name: keyHeartbeatInterval, Type: TypeInt, Default: "5000", Validator: AtLeast(1),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerHeartbeatInterval, MinKey: keyBrokerMinHeartbeatInterval, MaxKey: keyBrokerMaxHeartbeatInterval,
			Doc: "The heartbeat interval given to the members of a share group.",
		},
		{
			Name: keyRecordLockDuration, Type: TypeInt, Default: "30000", Validator: AtLeast(1000),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerRecordLockDuration, MinKey: keyBrokerMinRecordLock, MaxKey: keyBrokerMaxRecordLock,
			Doc: "The record acquisition lock duration in milliseconds for share groups.",
		},
		{
			Name: keyDeliveryCountLimit, Type: TypeInt, Default: "5", Validator: AtLeast(2),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerDeliveryCountLimit, MinKey: keyBrokerMinDeliveryCount, MaxKey: keyBrokerMaxDeliveryCount,
			Doc: "The maximum number of delivery attempts for a record delivered to a share group. When it is lowered " +
				"while records are in flight, one final attempt beyond the new limit may be made before a record is archived.",
		},
		{
			Name: keyRecordLocks, Type: TypeInt, Default: "2000", Validator: AtLeast(100),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerRecordLocks, MinKey: keyBrokerMinRecordLocks, MaxKey: keyBrokerMaxRecordLocks,
			Doc: "Share-group record lock limit per share-partition.",
		},
		{
			Name: keyRenewAcknowledge, Type: TypeBoolean, Default: "true",
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Doc: "Whether the renew acknowledge type is enabled for the share group.",
		},
		{
			Name: keyAutoOffsetReset, Type: TypeString, Default: "latest",
			Validator:  Rule{Desc: "earliest, latest or by_duration:<ISO-8601 duration, not negative>", Check: checkAutoOffsetReset},
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Doc: "The strategy to initialize the share-partition start offset: earliest (the earliest offset), latest " +
				"(the latest offset) or by_duration:<duration> (the offset of that long before the current time, e.g. " +
				"by_duration:PT1H; ISO-8601 format PnDTnHnMn.nS, not negative).",
		},
		{
			Name: keyIsolationLevel, Type: TypeString, Default: "read_uncommitted",
			Validator:  OneOf{"read_committed", "read_uncommitted"},
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Doc: "Controls how to read records written transactionally. If set to read_committed, the share group will " +
				"only deliver transactional records which have been committed. If set to read_uncommitted, the share group " +
				"will return all messages, even transactional messages which have been aborted. Non-transactional records " +
				"will be returned unconditionally in either mode.",
		},
		{
			Name: keyAssignmentInterval, Type: TypeInt, Default: "1000", Validator: AtLeast(0),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerAssignmentInterval, MinKey: keyBrokerMinAssignment, MaxKey: keyBrokerMaxAssignment,
			Doc: "The interval between assignment updates for a share group, in milliseconds.",
		},
		{
			Name: keyAssignorOffload, Type: TypeBoolean, Default: "true",
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keyBrokerAssignorOffload,
			Doc:     "Whether to offload share group assignment to a group coordinator background thread.",
		},
		{
			Name: keyDeadLetterTopicName, Type: TypeString, Default: "",
			Validator:  Rule{Desc: `empty, or a topic name: up to 249 of a-z A-Z 0-9 . _ -, not "." or "..", not starting with "__"`, Check: checkDeadLetterTopicName},
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Doc: "The name of the topic to be used as the dead-letter queue (DLQ) topic for this share group. If blank " +
				"(the default), the group does not have a DLQ topic.",
		},
		{
			Name: keyDeadLetterCopy, Type: TypeBoolean, Default: "false",
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Doc: "When writing onto the dead-letter queue topic, whether to copy the original record onto the DLQ topic, " +
				"or just write a record containing the context information headers.",
		},
		{
			Name: keyGroupSnapshotLimit, Type: TypeInt, Default: "500", Validator: Between(snapshotFloor, math.MaxInt32),
			Importance: ImportanceMedium, Scope: ScopeGroup, Dynamic: true,
			Synonym: keySnapshotCeiling, MaxKey: keySnapshotCeiling,
			Doc: "The number of update records the share coordinator writes between snapshot records for this group's " +
				"share partitions. Unset, the group follows share.coordinator.snapshot.update.records.per.snapshot as it " +
				"is at the time. Set, it must lie in [200, that broker value]; if the broker value is later lowered below " +
				"it, the override is kept and the lower broker value applies.",
		},
	}
}
