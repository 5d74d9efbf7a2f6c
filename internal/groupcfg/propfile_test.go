package groupcfg

import (
	"strings"
	"testing"

	"github.com/magiconair/properties"
)

// kafkaServerProperties is a broker's server.properties as Kafka ships it for a combined KRaft
// node, with the Confluent metrics reporter and two ZooKeeper-era keys, plus one key that is
// coordinatord's too (share.coordinator.state.topic.replication.factor).
const kafkaServerProperties = `# Server basics
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093

# Socket server
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

# Log basics
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1

# Internal topics
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1

# Retention
log.retention.hours=168
log.retention.check.interval.ms=300000
metric.reporters=io.confluent.metrics.reporter.ConfluentMetricsReporter
confluent.metrics.reporter.bootstrap.servers=localhost:9092

# Group coordinator
group.initial.rebalance.delay.ms=0

# From an older broker
broker.id=0
zookeeper.connect=localhost:2181
ssl.keystore.location=/etc/kafka/broker.jks
`

// TestKafkaServerProperties: a Kafka broker's server.properties gets one problem for every
// broker key that does not apply here, naming them and the flags that replace node.id,
// listeners, advertised.listeners and log.dirs, instead of one "unknown config" per key. A
// misspelt coordinatord key next to them is still unknown, and a coordinatord key they share
// is taken.
func TestKafkaServerProperties(t *testing.T) {
	file := writeProps(t, kafkaServerProperties+"share.coordinator.write.timout.ms=5000\n")
	problems := staticProblems(Sources{File: file})
	if len(problems) != 2 {
		t.Fatalf("want 2 problems (the Kafka keys, the misspelt key), got %d:\n%v", len(problems), problems)
	}
	// Problems about single keys come first, then the summary of the source.
	summary := problems[1].String()
	var kafkaKeys []string
	for _, line := range strings.Split(kafkaServerProperties, "\n") {
		if key, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") && key != keyReplicationFactor {
			kafkaKeys = append(kafkaKeys, key)
		}
	}
	for _, want := range append([]string{
		"28 Kafka broker configs do not apply to a standalone share coordinator",
		"node.id: use --node-id", "broker.id: use --node-id", "listeners: use --listen",
		"advertised.listeners: use --advertised-listen", "log.dirs: use --data-dir", "ssl.*: use the tls.* configs",
		"controller.quorum.bootstrap.servers: use --initial-cluster", "(from file " + file + ")",
	}, kafkaKeys...) {
		if !strings.Contains(summary, want) {
			t.Errorf("summary lacks %q:\n%s", want, summary)
		}
	}
	if strings.Contains(summary, keyReplicationFactor+",") || strings.ContainsAny(summary, "\n\r") {
		t.Errorf("summary names a coordinatord key or is not one line:\n%s", summary)
	}
	if !strings.Contains(problems[0].Message, "unknown config share.coordinator.write.timout.ms") {
		t.Errorf("first problem: %s", problems[0])
	}

	// Without the misspelt key, only the summary; a single Kafka key given with --override is
	// named on its own.
	problems = staticProblems(Sources{File: writeProps(t, kafkaServerProperties), Overrides: []string{"broker.id=2"}})
	if len(problems) != 2 || !strings.Contains(problems[1].String(),
		"broker.id is a Kafka broker config that does not apply to a standalone share coordinator; remove it") ||
		!strings.Contains(problems[1].String(), "broker.id: use --node-id") || problems[1].Source != "--override" {
		t.Fatalf("problems: %v", problems)
	}
}

// TestRepeatedKeysInFile: a broker key set more than once in the file is refused with its line
// numbers and values, wherever the lines are (after continuation lines and comments, with CRLF
// line ends, spelt with escapes); a key set once is not.
func TestRepeatedKeysInFile(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // one substring set per expected problem
	}{
		{"twice", "share.coordinator.write.timeout.ms=5000\nmetrics.group.label.max=7\nshare.coordinator.write.timeout.ms=8000\n",
			[]string{"share.coordinator.write.timeout.ms is set 2 times, on lines 1 and 3 (values 5000 and 8000): keep one of them"}},
		{"three times, after a continuation and a comment",
			"# metrics.group.label.max=1\nmetrics.group.label.max=7\nshare.coordinator.write.timeout.ms=5\\\n  000\n! x\nmetrics.group.label.max = 8\n\nmetrics.group.label.max 9",
			[]string{"metrics.group.label.max is set 3 times, on lines 2, 6 and 8 (values 7, 8 and 9)"}},
		{"CRLF and CR", "metrics.group.label.max=7\r\n\r\nmetrics.group.label.max=8\rmetrics.group.label.max=7",
			[]string{"on lines 1, 3 and 4"}},
		{"spelt with an escape", "metrics.group.label.max=7\nmetrics.group.label\\u002emax=8\n", []string{"on lines 1 and 2"}},
		{"the same value", "state.log.sync=file\nstate.log.sync=file\n", []string{"state.log.sync is set 2 times, on lines 1 and 2 (values file and file)"}},
		{"a continuation that looks like a key", "tls.cert.file=/a\\\nmetrics.group.label.max=7\nmetrics.group.label.max=8\n", nil},
		{"an escaped backslash does not continue", "tls.cert.file=/a\\\\\nmetrics.group.label.max=7\nmetrics.group.label.max=8\n",
			[]string{"on lines 2 and 3"}},
		{"each key once", "metrics.group.label.max=7\nshare.coordinator.write.timeout.ms=5000\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			problems := staticProblems(Sources{File: writeProps(t, tc.text)})
			if len(problems) != len(tc.want) {
				t.Fatalf("want %d problems, got %v", len(tc.want), problems)
			}
			for i, want := range tc.want {
				if !strings.Contains(problems[i].Message, want) || strings.ContainsAny(problems[i].Message, "\n\r") {
					t.Errorf("problem %q lacks %q", problems[i].Message, want)
				}
			}
		})
	}
	// The problem stops the start, whatever an override says.
	if _, err := LoadStatic(Sources{File: writeProps(t, "metrics.group.label.max=7\nmetrics.group.label.max=8\n"),
		Overrides: []string{"metrics.group.label.max=9"}}); err == nil {
		t.Fatal("a key set twice in the file was accepted")
	}
}

// FuzzFileSettings: the settings read line by line are the file's, as its loader reads it whole:
// the same keys, each last value the loader's value.
func FuzzFileSettings(f *testing.F) {
	f.Add([]byte(kafkaServerProperties))
	f.Add([]byte("a=1\\\n  2\r\n# c\\\nb : 3\\\\\n\\u0061=4\n  ! d\nc"))
	f.Add([]byte("a\\\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		loader := properties.Loader{Encoding: properties.UTF8, DisableExpansion: true}
		whole, err := loader.LoadBytes(data)
		if err != nil {
			return
		}
		last := make(map[string]string)
		for _, s := range fileSettings(loader, data) {
			last[s.key] = s.value
		}
		if len(last) != whole.Len() {
			t.Fatalf("line by line: %q; whole: %q", last, whole.Map())
		}
		for k, v := range last {
			if w, ok := whole.Get(k); !ok || w != v {
				t.Fatalf("key %q: line by line %q, whole %q (present %v)", k, v, w, ok)
			}
		}
	})
}
