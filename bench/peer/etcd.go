package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// findEtcd returns the etcd binary: path if set, else etcd on PATH, else Debian's etcd-server
// installed with apt-get (as root).
func findEtcd(path string, logf func(string, ...any)) (string, error) {
	if path != "" {
		return path, nil
	}
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	_, aptErr := exec.LookPath("apt-get")
	if os.Geteuid() != 0 || aptErr != nil {
		return "", errors.New("etcd is not on PATH: install it (on Debian, as root: apt-get install etcd-server) or name it with -etcd")
	}
	logf("etcd is not on PATH: installing Debian's etcd-server with apt-get")
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "etcd-server"}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return exec.LookPath("etcd")
}

// etcdVersion is the first line of etcd --version.
func etcdVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}

// etcdCluster is a running etcd of one or more members, each on its own loopback address.
type etcdCluster struct {
	members   []*proc
	endpoints []string // client URLs
}

// etcdHost is member i's (1-based) loopback address.
func etcdHost(i int) string { return fmt.Sprintf("127.0.0.%d", 10+i) }

// startEtcd starts an etcd of n members with their data under dir, with etcd's defaults (a WAL
// fsync before each batch of writes is acknowledged), and waits until every member is healthy.
func startEtcd(ctx context.Context, bin, dir string, n int) (*etcdCluster, error) {
	var initial, addrs []string
	for i := 1; i <= n; i++ {
		initial = append(initial, fmt.Sprintf("m%d=http://%s:2380", i, etcdHost(i)))
		addrs = append(addrs, etcdHost(i)+":2379", etcdHost(i)+":2380")
	}
	if err := checkFree(addrs...); err != nil {
		return nil, err
	}
	c := &etcdCluster{}
	for i := 1; i <= n; i++ {
		host := etcdHost(i)
		client, peer := "http://"+host+":2379", "http://"+host+":2380"
		p := &proc{name: fmt.Sprintf("etcd member %d", i), bin: bin, log: filepath.Join(dir, fmt.Sprintf("etcd-%d.log", i)), args: []string{
			"--name", fmt.Sprintf("m%d", i), "--data-dir", filepath.Join(dir, fmt.Sprintf("m%d", i)),
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", "bench-peer", "--logger", "zap", "--log-level", "warn",
		}}
		if err := p.start(); err != nil {
			c.stop()
			return nil, err
		}
		c.members = append(c.members, p)
		c.endpoints = append(c.endpoints, client)
	}
	for i, p := range c.members {
		ok := func() bool { return etcdHealthy(ctx, c.endpoints[i]) }
		if err := waitFor(ctx, p, time.Minute, 100*time.Millisecond, p.name+" healthy", ok); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// etcdHealthy reports whether the member at endpoint answers its /health with "true".
func etcdHealthy(ctx context.Context, endpoint string) bool {
	return httpStatus(ctx, endpoint+"/health") == 200
}

func (c *etcdCluster) stop() {
	for _, p := range c.members {
		p.stop(10 * time.Second)
	}
}

// etcdTarget drives an etcd with conns clients, each balancing over every member (etcd's client
// default; a member that does not lead forwards the Put to the leader).
type etcdTarget struct {
	clients []*clientv3.Client
}

func newEtcdTarget(c *etcdCluster, conns int) (*etcdTarget, error) {
	clients, err := openClients(conns, func() (*clientv3.Client, error) {
		return clientv3.New(clientv3.Config{Endpoints: c.endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	})
	return &etcdTarget{clients: clients}, err
}

// prepare writes every key once, so that the measured Puts all overwrite a key, as the
// coordinatord writes all update a share partition.
func (t *etcdTarget) prepare(ctx context.Context, keys int) error {
	w := newWorkload(keys)
	put := t.writer(0)
	for k := range keys {
		if cause := put(ctx, k, w.writeOf(k)); cause != "" {
			return fmt.Errorf("etcd: put %s: %s", key(k), cause)
		}
	}
	return nil
}

// writer puts the write's request, marshalled, under its share partition's key: the same bytes
// as coordinatord receives.
func (t *etcdTarget) writer(c int) writer {
	cl := t.clients[c]
	return func(ctx context.Context, k int, req *pb.WriteShareGroupStateRequest) string {
		value, err := proto.Marshal(req)
		if err != nil {
			return err.Error()
		}
		if _, err := cl.Put(ctx, key(k), string(value)); err != nil {
			return shortCause(err)
		}
		return ""
	}
}

func (t *etcdTarget) close() { closeAll(t.clients) }

// shortCause is an error's text cut to its first 80 characters, to count failures by cause.
func shortCause(err error) string {
	s := err.Error()
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}
