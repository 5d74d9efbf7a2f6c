package raftnet

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// countingReader counts the read calls that reach the connection.
type countingReader struct {
	r     io.Reader
	calls int
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.calls++
	return c.r.Read(p)
}

// Frames that arrive together are read with few read calls, not two per frame, and come out
// whole and in order.
func TestFramesThatArriveTogetherAreReadTogether(t *testing.T) {
	var wire bytes.Buffer
	const frames = 200
	for i := range frames {
		payload := []byte(fmt.Sprintf("message batch %d", i))
		var h [frameHeaderSize]byte
		putHeader(h[:], payload)
		wire.Write(h[:])
		wire.Write(payload)
	}
	size := wire.Len()
	conn := &countingReader{r: &wire}
	fr := newFrameReader(conn)
	for i := range frames {
		n, sum, err := fr.readHeader()
		if err != nil {
			t.Fatalf("frame %d: header: %v", i, err)
		}
		p, err := fr.readPayload(n, sum)
		if err != nil {
			t.Fatalf("frame %d: payload: %v", i, err)
		}
		if want := fmt.Sprintf("message batch %d", i); string(p) != want {
			t.Fatalf("frame %d: %q, want %q", i, p, want)
		}
	}
	if most := size/readBufferBytes + 2; conn.calls > most {
		t.Fatalf("%d frames (%d bytes) took %d read calls, want at most %d", frames, size, conn.calls, most)
	}
}
