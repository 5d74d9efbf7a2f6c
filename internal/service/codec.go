package service

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/protoadapt"
)

// validated is a request message whose Validate method the validation interceptor calls before
// the handler runs. Every sharecoord.v1 request implements it, and its Validate rejects string
// fields that are not valid UTF-8, naming the field.
type validated interface {
	Validate() error
}

// codec is the server's message codec: gRPC's protobuf codec, except for requests that carry a
// string field that is not valid UTF-8.
//
// proto3 requires string fields to be UTF-8, and protobuf's decoder refuses the whole message
// otherwise. gRPC reports any decoding failure as codes.Internal ("failed to unmarshal the
// received message") before an interceptor runs, which reads as a server fault and names no
// field. For messages that validate themselves (validated), codec decodes such a message
// leniently instead, keeping the bad bytes, so that the validation interceptor refuses the call
// with INVALID_ARGUMENT naming the field. Every other decoding failure is reported as before.
type codec struct {
	inner encoding.CodecV2
}

// newCodec returns the server codec. It is stateless and safe for concurrent use.
func newCodec() encoding.CodecV2 {
	return codec{inner: encoding.GetCodecV2(protocodec.Name)}
}

// Name returns "proto": the codec speaks the protobuf wire format, as gRPC's default does.
func (codec) Name() string { return protocodec.Name }

// Marshal encodes v as gRPC's protobuf codec does; a read reply encodes itself (readReply.marshal).
func (c codec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(*readReply); ok {
		return r.marshal()
	}
	return c.inner.Marshal(v)
}

// Unmarshal decodes data into v as gRPC's protobuf codec does; when that fails only because a
// string field is not valid UTF-8 and v validates itself, v is decoded leniently instead. A
// request (v validates itself) of more than MaxRequestElements entries is not decoded but marked
// for refusal.
func (c codec) Unmarshal(data mem.BufferSlice, v any) error {
	// A request is counted on the wire before it is decoded (elements.go): one of too many
	// entries is marked for refusal instead.
	if _, ok := v.(validated); ok {
		if m := messageOf(v); m != nil {
			var n int
			if len(data) == 1 {
				n = countElements(data[0].ReadOnlyData(), m.ProtoReflect().Descriptor(), MaxRequestElements)
			} else {
				buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
				n = countElements(buf.ReadOnlyData(), m.ProtoReflect().Descriptor(), MaxRequestElements)
				buf.Free()
			}
			if n > MaxRequestElements {
				markTooMany(m, n)
				return nil
			}
		}
	}
	err := c.inner.Unmarshal(data, v)
	if err == nil || !isInvalidUTF8(err) {
		return err
	}
	if _, ok := v.(validated); !ok {
		return err
	}
	m := messageOf(v)
	if m == nil {
		return err
	}
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	proto.Reset(m)
	if lerr := unmarshalLenient(buf.ReadOnlyData(), m.ProtoReflect()); lerr != nil {
		return fmt.Errorf("%w (lenient decoding: %v)", err, lerr)
	}
	return nil
}

// isInvalidUTF8 reports whether err is protobuf's "string field contains invalid UTF-8". The
// protobuf runtime marks that error with an InvalidUTF8() method.
func isInvalidUTF8(err error) bool {
	var marked interface{ InvalidUTF8() bool }
	return errors.As(err, &marked) && marked.InvalidUTF8()
}

// messageOf returns v as a protobuf message, or nil.
func messageOf(v any) proto.Message {
	switch m := v.(type) {
	case proto.Message:
		return m
	case protoadapt.MessageV1:
		return protoadapt.MessageV2Of(m)
	}
	return nil
}
