package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coordinatord/coordinatord/internal/datadir"
)

// Cluster flags that cannot start a node stop it with status 2 and say what is wrong, before
// anything is written to the data directory.
func TestBadClusterFlagsExit2(t *testing.T) {
	raft := freePort(t)
	self := "1=" + raft
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"no address", []string{"--initial-cluster", "1", "--raft-listen", raft}, []string{"--initial-cluster", "ID=HOST:PORT"}},
		{"id zero", []string{"--initial-cluster", "0=" + raft, "--raft-listen", raft}, []string{"≥ 1"}},
		{"id twice", []string{"--initial-cluster", self + ",1=127.0.0.1:1", "--raft-listen", raft}, []string{"appears twice"}},
		{"address twice", []string{"--initial-cluster", self + ",2=" + raft, "--raft-listen", raft}, []string{"same address"}},
		{"bad port", []string{"--initial-cluster", "1=127.0.0.1:99999", "--raft-listen", raft}, []string{"[1, 65535]"}},
		{"node not a member", []string{"--initial-cluster", self, "--node-id", "2", "--raft-listen", raft}, []string{"does not name this node"}},
		{"node id zero", []string{"--initial-cluster", self, "--node-id", "0", "--raft-listen", raft}, []string{"--node-id 0", "≥ 1"}},
		{"bad raft listen", []string{"--initial-cluster", self, "--raft-listen", "nowhere"}, []string{"--raft-listen", "HOST:PORT"}},
		{"replication factor", []string{"--initial-cluster", self, "--raft-listen", raft,
			"--override", "share.coordinator.state.topic.replication.factor=0"}, []string{"replication.factor", "[1, 7]"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			wantBadConfig(t, dir, nil, tc.args, tc.want...)
			if _, err := os.Stat(datadir.RaftDir(dir)); err == nil {
				t.Errorf("the refused node created %s", datadir.RaftDir(dir))
			}
		})
	}
}

// A data directory written in one mode is refused in the other.
func TestDataDirBelongsToItsMode(t *testing.T) {
	single := t.TempDir()
	p := startProc(t, single)
	p.stop(syscall.SIGTERM)
	raft := freePort(t)
	wantBadConfig(t, single, nil, []string{"--initial-cluster", "1=" + raft, "--raft-listen", raft}, "single node", "config store")

	clustered := t.TempDir()
	raft = freePort(t)
	c := startProc(t, clustered, "--initial-cluster", "1="+raft, "--raft-listen", raft)
	c.stop(syscall.SIGTERM)
	wantBadConfig(t, clustered, nil, nil, "cluster node", "--initial-cluster")
}

// freePort returns a loopback address whose port was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// With TLS on, a cluster node needs the peer CA, so that its replication port is not the one
// plaintext port; the peer CA alone, without TLS, would not be used and is refused too.
func TestClusterTLSNeedsThePeerCA(t *testing.T) {
	fx := newSecurityFixture(t)
	raft := freePort(t)
	cluster := []string{"--initial-cluster", "1=" + raft, "--raft-listen", raft}
	wantBadConfig(t, filepath.Join(t.TempDir(), "data"), nil, append(fx.args("none"), cluster...),
		"tls.enabled=true in cluster mode needs tls.peer.ca.file")
	wantBadConfig(t, filepath.Join(t.TempDir(), "data"), nil, append(cluster, "--override", "tls.peer.ca.file="+fx.cas),
		"tls.peer.ca.file is set but tls.enabled=false")
}

func TestNodeIDFromPodName(t *testing.T) {
	for _, tc := range []struct {
		pod    string
		want   int32
		errSub string
	}{
		{pod: "coordinatord-0", want: 1},
		{pod: "my-coordinatord-12", want: 13},
		{pod: "coordinatord", errSub: "NAME-ORDINAL"},
		{pod: "coordinatord-x", errSub: "NAME-ORDINAL"},
		{pod: "coordinatord-+1", errSub: "NAME-ORDINAL"},
		{pod: "coordinatord-", errSub: "NAME-ORDINAL"},
		{pod: "coordinatord-99999999999", errSub: "NAME-ORDINAL"},
	} {
		f := &serveFlags{podName: tc.pod, nodeID: 1}
		err := f.nodeIDFromPodName()
		switch {
		case tc.errSub != "" && (err == nil || !strings.Contains(err.Error(), tc.errSub)):
			t.Errorf("%q: error %v, want one saying %q", tc.pod, err, tc.errSub)
		case tc.errSub == "" && (err != nil || f.nodeID != tc.want):
			t.Errorf("%q: node id %d, error %v; want %d", tc.pod, f.nodeID, err, tc.want)
		}
	}
	dir := filepath.Join(t.TempDir(), "data")
	wantBadConfig(t, dir, nil, []string{"--node-id-from-pod-name", "coordinatord-1", "--node-id", "2"}, "give one of them")
	wantBadConfig(t, dir, nil, []string{"--node-id-from-pod-name", "coordinatord"}, "NAME-ORDINAL")
}
