package clustertest

import (
	"crypto/x509/pkix"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coordinatord/coordinatord/internal/testcert"
)

// TestPeerTLS runs a cluster whose replication port is mutual TLS (tls.enabled with
// tls.peer.ca.file). Nodes with certificates of the peer CA form the cluster and catch up; a node
// whose certificate another CA signed is refused by its peers: it never catches up, and they log
// the refused handshakes. Given a certificate of the peer CA, the same node joins.
func TestPeerTLS(t *testing.T) {
	c := newCluster(t, clusterOptions{nodes: 3})
	dir := t.TempDir()
	peerCA := testcert.NewCA(t, "peer CA")
	caFile := testcert.WriteCAFile(t, peerCA, dir, "peer-ca.pem")
	certArgs := func(n *node, ca *testcert.CA, name string) []string {
		cert, key := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
		testcert.WriteKeyPair(t, ca.IssuePeer(t, pkix.Name{CommonName: name}, net.ParseIP(n.host)), cert, key)
		return []string{"--override", "tls.enabled=true", "--override", "tls.cert.file=" + cert,
			"--override", "tls.key.file=" + key, "--override", "tls.peer.ca.file=" + caFile}
	}
	base := map[int][]string{}
	for _, n := range c.nodes {
		base[n.id] = n.args
		n.args = append(append([]string{}, n.args...), certArgs(n, peerCA, "node"+strconv.Itoa(n.id))...)
	}
	stranger := c.node(3)
	stranger.args = append(append([]string{}, base[3]...), certArgs(stranger, testcert.NewCA(t, "another CA"), "stranger")...)
	for _, n := range c.nodes {
		n.start()
	}
	c.node(1).waitReady(readyTimeout)
	c.node(2).waitReady(readyTimeout)

	// The stranger stays behind: none of its replicas hears from the cluster.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if code, _, err := stranger.get("/readyz"); err == nil && code == http.StatusOK {
			t.Fatal("a node with a certificate of another CA caught up with the cluster")
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, n := range c.others(3) {
		if _, ok := n.current().waitLine(5*time.Second, func(l logLine) bool {
			e, _ := l.Fields["error"].(string)
			return strings.HasPrefix(l.Msg, "replication port: refused a connection") && strings.Contains(e, "TLS handshake")
		}); !ok {
			t.Errorf("%v logged no refused TLS handshake of the stranger\n%s", n, n.current().tail(20))
		}
	}

	// With a certificate of the peer CA it joins.
	stranger.terminate()
	stranger.args = append(append([]string{}, base[3]...), certArgs(stranger, peerCA, "node3")...)
	stranger.start()
	stranger.waitReady(readyTimeout)
	c.waitBalanced()
}
