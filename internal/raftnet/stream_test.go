package raftnet

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

// accepted is how many connections p's port holds open.
func (p *peer) accepted() int {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	return len(p.t.conns)
}

// The message connections dragonboat opens to one peer share one stream: batches sent on all of
// them at once arrive whole, over one connection.
func TestMessageConnectionsToAPeerShareOneStream(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	const conns, perConn = 4, 50
	var cs []raftio.IConnection
	for range conns {
		cs = append(cs, a.connect(t, b))
	}
	arrived := make(chan []pb.MessageBatch)
	go func() {
		var got []pb.MessageBatch
		timeout := time.After(10 * time.Second)
		for len(got) < conns*perConn {
			select {
			case m := <-b.batches:
				got = append(got, m)
			case <-timeout:
				arrived <- got
				return
			}
		}
		arrived <- got
	}()
	var wg sync.WaitGroup
	errs := make(chan error, conns*perConn)
	for i, c := range cs {
		wg.Go(func() {
			for j := range perConn {
				m := batch(1 + (i*perConn+j)%20)
				m.SourceAddress = "sender"
				m.BinVer = uint32(i*perConn + j)
				if err := c.SendMessageBatch(m); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	all := <-arrived
	if len(all) != conns*perConn {
		t.Fatalf("%d batches arrived in 10 s, want %d", len(all), conns*perConn)
	}
	seen := map[uint32]bool{}
	for _, got := range all {
		if want := 1 + int(got.BinVer)%20; len(got.Requests) != want || seen[got.BinVer] {
			t.Fatalf("batch %d arrived with %d requests (want %d), or twice", got.BinVer, len(got.Requests), want)
		}
		seen[got.BinVer] = true
	}
	if n := b.accepted(); n != 1 {
		t.Fatalf("the peer holds %d connections, want the one stream", n)
	}
	for _, c := range cs[1:] {
		c.Close()
	}
	if err := cs[0].SendMessageBatch(batch(1)); err != nil {
		t.Fatalf("the stream closed before its last connection: %v", err)
	}
	receive(t, b.batches)
	cs[0].Close()
	waitClosed(t, cs[0].(*messageConn).s.conn)
}

// A stream that broke fails the sends on it; the next connection dials a new one.
func TestABrokenStreamIsDialedAgain(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	c1 := a.connect(t, b)
	if err := c1.SendMessageBatch(batch(1)); err != nil {
		t.Fatal(err)
	}
	receive(t, b.batches)
	_ = c1.(*messageConn).s.conn.Close() // as a broken connection would
	if err := c1.SendMessageBatch(batch(1)); err == nil {
		t.Fatal("a send on a broken stream succeeded")
	}
	c2 := a.connect(t, b)
	if c2.(*messageConn).s == c1.(*messageConn).s {
		t.Fatal("the new connection uses the broken stream")
	}
	if err := c2.SendMessageBatch(batch(2)); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, b.batches); len(got.Requests) != 2 {
		t.Fatalf("got a batch of %d requests, want 2", len(got.Requests))
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.accepted() != 1 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := b.accepted(); n != 1 {
		t.Fatalf("the peer holds %d connections, want the new stream's only", n)
	}
}

// A transport that closed opens no stream.
func TestNoStreamAfterClose(t *testing.T) {
	a, b := startPeer(t, Options{}), startPeer(t, Options{})
	if err := a.t.Close(); err != nil {
		t.Fatal(err)
	}
	if c, err := a.t.GetConnection(context.Background(), b.addr()); err == nil {
		c.Close()
		t.Fatal("a closed transport opened a message connection")
	}
}
