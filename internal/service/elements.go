package service

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// MaxRequestElements bounds the entries of a request: the elements of its repeated fields and
// its nested messages (topics, partitions, state batches, keys, configs), counted on the wire
// before anything is decoded. Decoding makes one object per entry, so the byte limit alone
// (grpc.max.recv.message.bytes) lets a request of empty state batches, two bytes each, take
// gigabytes. A legitimate request holds a few thousand entries.
const MaxRequestElements = 1 << 18

// tooManyField is the field number under which the codec marks, in place of the contents, a
// request over MaxRequestElements (the largest valid number, which no sharecoord.v1 message uses).
// The mark holds the count; limitElements turns it into INVALID_ARGUMENT, after the call was
// counted and logged. A client that sends this field itself gets the same answer.
const tooManyField = protowire.MaxValidNumber

// countElements counts the entries of the wire-format message b of type md, descending into its
// nested messages, and stops once the count passes limit. Malformed wire data ends the count: the
// decoder reports it.
func countElements(b []byte, md protoreflect.MessageDescriptor, limit int) int {
	n := 0
	var walk func(b []byte, md protoreflect.MessageDescriptor, depth int)
	walk = func(b []byte, md protoreflect.MessageDescriptor, depth int) {
		// A message without list or message fields (a state batch) is one entry whatever it
		// holds: it is not walked. The answer is kept for the field seen last, which is the same
		// one over a run of repeated entries.
		var lastFD protoreflect.FieldDescriptor
		lastLeaf := false
		for len(b) > 0 && n <= limit {
			num, typ, l := protowire.ConsumeTag(b)
			if l < 0 {
				return
			}
			b = b[l:]
			l = protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				return
			}
			value := b[:l]
			b = b[l:]
			fd := md.Fields().ByNumber(num)
			switch {
			case fd == nil:
			case fd.Message() != nil && typ == protowire.BytesType:
				n++
				if fd != lastFD {
					lastFD, lastLeaf = fd, isLeaf(fd.Message())
				}
				if depth > 0 && !lastLeaf {
					if v, vl := protowire.ConsumeBytes(value); vl >= 0 {
						walk(v, fd.Message(), depth-1)
					}
				}
			case fd.IsList() && typ == protowire.BytesType && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
				n += len(value) // a packed list: at most one entry per byte
			case fd.IsList():
				n++
			}
		}
	}
	walk(b, md, 100)
	return n
}

// isLeaf reports whether md has no list and no message fields.
func isLeaf(md protoreflect.MessageDescriptor) bool {
	fields := md.Fields()
	for i := range fields.Len() {
		if fd := fields.Get(i); fd.IsList() || fd.IsMap() || fd.Message() != nil {
			return false
		}
	}
	return true
}

// markTooMany replaces m's contents with the mark of a request of n entries.
func markTooMany(m proto.Message, n int) {
	proto.Reset(m)
	var mark []byte
	mark = protowire.AppendTag(mark, tooManyField, protowire.VarintType)
	mark = protowire.AppendVarint(mark, uint64(n))
	m.ProtoReflect().SetUnknown(mark)
}

// tooMany returns the entry count the codec marked req with (at least MaxRequestElements+1; the
// count stops there), if it did.
func tooMany(req any) (int, bool) {
	m := messageOf(req)
	if m == nil {
		return 0, false
	}
	for b := m.ProtoReflect().GetUnknown(); len(b) > 0; {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
		if num == tooManyField && typ == protowire.VarintType {
			v, vl := protowire.ConsumeVarint(b)
			return int(min(v, 1<<62)), vl >= 0
		}
		l = protowire.ConsumeFieldValue(num, typ, b)
		if l < 0 {
			return 0, false
		}
		b = b[l:]
	}
	return 0, false
}

// limitElements refuses a request the codec marked as holding more than MaxRequestElements
// entries.
func limitElements(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if _, ok := tooMany(req); ok {
		return nil, status.Error(codes.InvalidArgument, fmt.Sprintf(
			"the request holds more than %d entries (topics, partitions, state batches, keys or configs together); split it into requests of at most %d",
			MaxRequestElements, MaxRequestElements))
	}
	return handler(ctx, req)
}
