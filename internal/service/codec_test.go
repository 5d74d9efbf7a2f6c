package service

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// badUTF8 is not UTF-8: 0xff never appears in UTF-8, and 0xc3 starts a sequence 0x28 cannot end.
const badUTF8 = "g\xff\xc3\x28"

// marker stands in for badUTF8 while a request is encoded (protobuf refuses to encode invalid
// UTF-8); it has the same length, so swapping the bytes afterwards keeps the encoding valid.
const marker = "g@@@"

// withBadUTF8 encodes m and replaces every occurrence of marker with badUTF8.
func withBadUTF8(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(marker)) {
		t.Fatalf("marker not found in the encoding of %v", m)
	}
	return bytes.ReplaceAll(b, []byte(marker), []byte(badUTF8))
}

// rawRequest is a request already in wire form; rawCodec sends it as it is.
type rawRequest []byte

// rawCodec is a client codec that sends rawRequest bytes unchanged (so tests can send what a
// protobuf library would refuse to encode) and decodes responses with protobuf.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(rawRequest)
	if !ok {
		return nil, errors.New("rawCodec sends rawRequest only")
	}
	return mem.BufferSlice{mem.SliceBuffer(r)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// invokeRaw calls method with the wire bytes req and decodes the answer into resp.
func invokeRaw(t *testing.T, conn grpc.ClientConnInterface, method string, req []byte, resp proto.Message) error {
	t.Helper()
	return conn.Invoke(ctxT(t), method, rawRequest(req), resp, grpc.ForceCodecV2(rawCodec{}))
}

const (
	methodInitialize = "/sharecoord.v1.ShareCoordinatorService/InitializeShareGroupState"
	methodRead       = "/sharecoord.v1.ShareCoordinatorService/ReadShareGroupState"
	methodWrite      = "/sharecoord.v1.ShareCoordinatorService/WriteShareGroupState"
	methodDelete     = "/sharecoord.v1.ShareCoordinatorService/DeleteShareGroupState"
	methodSummary    = "/sharecoord.v1.ShareCoordinatorService/ReadShareGroupStateSummary"
	methodFind       = "/sharecoord.v1.ShareCoordinatorService/FindCoordinator"
	methodAlter      = "/sharecoord.v1.ConfigService/IncrementalAlterConfigs"
	methodDescribe   = "/sharecoord.v1.ConfigService/DescribeConfigs"
)

// TestInvalidUTF8IsInvalidArgument sends requests with a string field that is not UTF-8, which
// gRPC's own codec would answer with INTERNAL; the server answers INVALID_ARGUMENT naming the
// field, and keeps serving.
func TestInvalidUTF8IsInvalidArgument(t *testing.T) {
	ts := startServer(t, testOptions{})
	cases := []struct {
		name   string
		method string
		req    proto.Message
		resp   proto.Message
		field  string
	}{
		{"group id", methodInitialize, initReq(marker, topicA, 0, 1, 0), &pb.InitializeShareGroupStateResponse{}, "group_id"},
		{"topic id", methodWrite, writeReq("g", marker, 0, 1, 1, 0), &pb.WriteShareGroupStateResponse{}, "topics[0].topic_id"},
		{"second topic id", methodRead, &pb.ReadShareGroupStateRequest{GroupId: "g", Topics: []*pb.ReadStateTopic{
			{TopicId: topicA, Partitions: []*pb.ReadStatePartition{{Partition: 0}}},
			{TopicId: marker, Partitions: []*pb.ReadStatePartition{{Partition: 0}}},
		}}, &pb.ReadShareGroupStateResponse{}, "topics[1].topic_id"},
		{"delete group id", methodDelete, &pb.DeleteShareGroupStateRequest{GroupId: marker, Topics: []*pb.DeleteStateTopic{
			{TopicId: topicA, Partitions: []*pb.DeleteStatePartition{{Partition: 0}}}}}, &pb.DeleteShareGroupStateResponse{}, "group_id"},
		{"summary topic id", methodSummary, &pb.ReadShareGroupStateSummaryRequest{GroupId: "g", Topics: []*pb.ReadStateSummaryTopic{
			{TopicId: marker, Partitions: []*pb.ReadStateSummaryPartition{{Partition: 0}}}}}, &pb.ReadShareGroupStateSummaryResponse{}, "topics[0].topic_id"},
		{"coordinator key", methodFind, &pb.FindCoordinatorRequest{Keys: []string{"g:" + topicA + ":0", marker + ":" + topicA + ":0"}},
			&pb.FindCoordinatorResponse{}, "keys[1]"},
		{"alter resource name", methodAlter, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			alter(pb.ResourceType_RESOURCE_TYPE_GROUP, marker, pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("300"))}},
			&pb.IncrementalAlterConfigsResponse{}, "resources[0].resource_name"},
		{"alter config name", methodAlter, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g", pb.ConfigOperation_CONFIG_OPERATION_SET, marker, proto.String("300"))}},
			&pb.IncrementalAlterConfigsResponse{}, "resources[0].configs[0].name"},
		{"alter config value", methodAlter, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
			alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g", pb.ConfigOperation_CONFIG_OPERATION_SET, "errors.deadletterqueue.topic.name", proto.String(marker))}},
			&pb.IncrementalAlterConfigsResponse{}, "resources[0].configs[0].value"},
		{"describe resource name", methodDescribe, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{
			{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: marker}}}, &pb.DescribeConfigsResponse{}, "resources[0].resource_name"},
		{"describe key", methodDescribe, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{
			{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "g", ConfigurationKeys: []string{snapshotOverride, marker}}}},
			&pb.DescribeConfigsResponse{}, "resources[0].configuration_keys[1]"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := invokeRaw(t, ts.conn, tc.method, withBadUTF8(t, tc.req), tc.resp)
			st := status.Convert(err)
			if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.field+" is not valid UTF-8") {
				t.Fatalf("error = %v, want InvalidArgument naming %s", err, tc.field)
			}
		})
	}
	// Still serving, and the refused alter changed nothing.
	if _, err := ts.state.InitializeShareGroupState(ctxT(t), initReq("g", topicA, 0, 1, 0)); err != nil {
		t.Fatalf("after the refused calls: %v", err)
	}
}

// TestUndecodableRequestStaysInternal documents the one decoding failure the server cannot turn
// into INVALID_ARGUMENT: bytes that are not a protobuf message at all are refused by gRPC itself
// with INTERNAL before any server code runs.
func TestUndecodableRequestStaysInternal(t *testing.T) {
	ts := startServer(t, testOptions{})
	for _, raw := range [][]byte{
		{0x0a, 0x05, 'g'},        // field 1 claims 5 bytes, 1 follows
		{0x08, 0xff, 0xff, 0xff}, // truncated varint
		{0x00, 0x01},             // field number 0
		{0x0b, 0x0a, 0x01},       // group 1 never ends
	} {
		err := invokeRaw(t, ts.conn, methodWrite, raw, &pb.WriteShareGroupStateResponse{})
		if st := status.Convert(err); st.Code() != codes.Internal || !strings.Contains(st.Message(), "unmarshal") {
			t.Fatalf("%x: error = %v, want gRPC's INTERNAL unmarshal failure", raw, err)
		}
	}
}

// requestTypes lists one empty message of every request type the server receives.
func requestTypes() []proto.Message {
	return []proto.Message{
		&pb.InitializeShareGroupStateRequest{}, &pb.ReadShareGroupStateRequest{}, &pb.WriteShareGroupStateRequest{},
		&pb.DeleteShareGroupStateRequest{}, &pb.ReadShareGroupStateSummaryRequest{}, &pb.FindCoordinatorRequest{},
		&pb.IncrementalAlterConfigsRequest{}, &pb.DescribeConfigsRequest{},
	}
}

// TestEveryStringFieldIsValidated walks every request type: for each string field anywhere in it
// (nested and repeated ones included), a request whose only bad string is that field must fail
// Validate naming the field. A string field added to the API without a check fails this test.
func TestEveryStringFieldIsValidated(t *testing.T) {
	for _, msg := range requestTypes() {
		for _, path := range stringFieldPaths(msg.ProtoReflect().Descriptor(), nil) {
			name := string(msg.ProtoReflect().Descriptor().Name()) + "." + pathName(path)
			t.Run(name, func(t *testing.T) {
				m := proto.Clone(msg)
				fillPath(m.ProtoReflect(), path)
				v, ok := m.(validated)
				if !ok {
					t.Fatalf("%T has no Validate method", m)
				}
				err := v.Validate()
				if err == nil || !strings.Contains(err.Error(), "not valid UTF-8") || !strings.Contains(err.Error(), string(path[len(path)-1].Name())) {
					t.Fatalf("Validate() = %v, want an error naming %s as not valid UTF-8", err, pathName(path))
				}
			})
		}
	}
}

// stringFieldPaths returns the paths (from the message md) of every string field.
func stringFieldPaths(md protoreflect.MessageDescriptor, prefix []protoreflect.FieldDescriptor) [][]protoreflect.FieldDescriptor {
	var out [][]protoreflect.FieldDescriptor
	fields := md.Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		path := append(append([]protoreflect.FieldDescriptor{}, prefix...), fd)
		switch fd.Kind() {
		case protoreflect.StringKind:
			out = append(out, path)
		case protoreflect.MessageKind:
			out = append(out, stringFieldPaths(fd.Message(), path)...)
		}
	}
	return out
}

func pathName(path []protoreflect.FieldDescriptor) string {
	names := make([]string, len(path))
	for i, fd := range path {
		names[i] = string(fd.Name())
	}
	return strings.Join(names, ".")
}

// fillPath sets the string at path to badUTF8, creating one element per repeated message on the
// way, and gives every message on the way otherwise valid content (a group id, a topic with one
// partition) so that only the bad string can fail validation.
func fillPath(m protoreflect.Message, path []protoreflect.FieldDescriptor) {
	fd := path[0]
	if len(path) == 1 {
		v := protoreflect.ValueOfString(badUTF8)
		if fd.IsList() {
			m.Mutable(fd).List().Append(v)
		} else {
			m.Set(fd, v)
		}
		fillDefaults(m, fd)
		return
	}
	var child protoreflect.Message
	if fd.IsList() {
		list := m.Mutable(fd).List()
		e := list.NewElement()
		list.Append(e)
		child = e.Message()
	} else {
		child = m.Mutable(fd).Message()
	}
	fillDefaults(m, fd)
	fillPath(child, path[1:])
}

// fillDefaults gives m a valid group id and one valid partition per topic where they are empty,
// except for the field except (being filled with bad content).
func fillDefaults(m protoreflect.Message, except protoreflect.FieldDescriptor) {
	fields := m.Descriptor().Fields()
	if fd := fields.ByName("group_id"); fd != nil && fd != except && m.Get(fd).String() == "" {
		m.Set(fd, protoreflect.ValueOfString("g"))
	}
	if fd := fields.ByName("partitions"); fd != nil && fd != except && m.Get(fd).List().Len() == 0 {
		list := m.Mutable(fd).List()
		list.Append(list.NewElement())
	}
}

// TestLenientDecodingMatchesProtobuf decodes valid requests both ways: the lenient decoder must
// give exactly what protobuf gives (merging of repeated singular messages, last-wins scalars,
// packed and unpacked encodings, unknown fields and wire-type mismatches kept as unknown).
func TestLenientDecodingMatchesProtobuf(t *testing.T) {
	w := writeReq("g", topicA, 3, 1, 2, 5, batch(5, 9, 2, 1), batch(1, 3, 0, 0))
	w.Topics[0].Partitions[0].DeliveryCompleteCount = proto.Int32(-1)
	wire, err := proto.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"write":                wire,
		"write twice (merged)": append(append([]byte{}, wire...), wire...),
		"unknown varint field": append(append([]byte{}, wire...), 0xf8, 0x01, 0x07), // field 31, varint 7
		"unknown bytes field":  append(append([]byte{}, wire...), 0xfa, 0x01, 0x02, 'h', 'i'),
		"group id as varint":   append(append([]byte{}, wire...), 0x08, 0x01), // field 1 (string) with the wrong wire type
		"topics as fixed32":    append(append([]byte{}, wire...), 0x15, 1, 2, 3, 4),
		"empty":                {},
		"unknown group":        append(append([]byte{}, wire...), 0xfb, 0x01, 0x08, 0x01, 0xfc, 0x01), // group 31 {field 1: 1}
		"negative int32 (10 bytes)": mustMarshal(t, &pb.InitializeShareGroupStateRequest{GroupId: "g", Topics: []*pb.InitializeStateTopic{
			{TopicId: topicA, Partitions: []*pb.InitializeStatePartition{{Partition: -7, StateEpoch: -1, StartOffset: -1}}}}}),
		"alter with optional value": mustMarshal(t, &pb.IncrementalAlterConfigsRequest{ValidateOnly: true, Resources: []*pb.AlterConfigsResource{
			alter(pb.ResourceType_RESOURCE_TYPE_BROKER, "", pb.ConfigOperation_CONFIG_OPERATION_DELETE, snapshotCeiling, proto.String(""))}}),
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			for _, typ := range requestTypes() {
				want, got := proto.Clone(typ), proto.Clone(typ)
				perr := proto.Unmarshal(b, want)
				lerr := unmarshalLenient(b, got.ProtoReflect())
				if (perr == nil) != (lerr == nil) {
					t.Fatalf("%T: protobuf error %v, lenient error %v", typ, perr, lerr)
				}
				if perr == nil && !proto.Equal(want, got) {
					t.Fatalf("%T: lenient decoding gave\n%v\nprotobuf gave\n%v", typ, got, want)
				}
			}
		})
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCodecKeepsOtherFailures checks that the codec only relaxes UTF-8, and only for messages
// that validate themselves.
func TestCodecKeepsOtherFailures(t *testing.T) {
	c := newCodec()
	bad := withBadUTF8(t, initReq(marker, topicA, 0, 1, 0))
	var req pb.InitializeShareGroupStateRequest
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bad)}, &req); err != nil {
		t.Fatalf("lenient decoding of a validated request: %v", err)
	}
	if req.GetGroupId() != badUTF8 || req.Validate() == nil {
		t.Fatalf("decoded group id %q; Validate() = %v", req.GetGroupId(), req.Validate())
	}
	// A response type has no Validate: protobuf's error stands.
	var resp pb.TopicResult
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(withBadUTF8(t, &pb.TopicResult{TopicId: marker}))}, &resp); err == nil || !isInvalidUTF8(err) {
		t.Fatalf("decoding a message without Validate: %v, want protobuf's invalid UTF-8 error", err)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05})}, &req); err == nil {
		t.Fatal("truncated input decoded")
	}
	out, err := c.Marshal(initReq("g", topicA, 0, 1, 0))
	if err != nil || out.Len() == 0 {
		t.Fatalf("Marshal = %d bytes, %v", out.Len(), err)
	}
	out.Free()
}

// A request of more entries than MaxRequestElements is refused with INVALID_ARGUMENT before it is
// decoded: millions of empty state batches (two bytes each) fit the byte limit and would take
// gigabytes as objects. Requests at the limit are decoded as usual.
func TestRequestElementLimit(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	if _, err := ts.state.InitializeShareGroupState(ctx, initReq("g", topicA, 0, 1, 0)); err != nil {
		t.Fatal(err)
	}
	batches := func(n int) *pb.WriteShareGroupStateRequest {
		r := writeReq("g", topicA, 0, 1, 1, 0)
		p := r.Topics[0].Partitions[0]
		for range n {
			p.StateBatches = append(p.StateBatches, &pb.StateBatch{})
		}
		return r
	}
	// One topic and one partition are 2 entries besides the batches.
	_, err := ts.state.WriteShareGroupState(ctx, batches(MaxRequestElements-2))
	if status.Code(err) == codes.InvalidArgument {
		t.Fatalf("a request of %d entries was refused: %v", MaxRequestElements, err)
	}
	_, err = ts.state.WriteShareGroupState(ctx, batches(MaxRequestElements-1))
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "more than 262144 entries") {
		t.Fatalf("a request of %d entries: %v, want INVALID_ARGUMENT", MaxRequestElements+1, err)
	}
	keys := make([]string, MaxRequestElements+1)
	for i := range keys {
		keys[i] = "k"
	}
	_, err = ts.state.FindCoordinator(ctx, &pb.FindCoordinatorRequest{Keys: keys})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "more than 262144 entries") {
		t.Fatalf("FindCoordinator with %d keys: %v, want INVALID_ARGUMENT", len(keys), err)
	}
	checkServing(t, startBadInputServer(t))
}

// BenchmarkCodecUnmarshalWrite decodes a typical WriteShareGroupState (one partition, two state
// batches) through the server codec, the element count included.
func BenchmarkCodecUnmarshalWrite(b *testing.B) {
	c := newCodec()
	wire, err := proto.Marshal(writeReq("bench-group", topicA, 7, 1, 1, 100, batch(100, 109, 2, 1), batch(110, 119, 0, 1)))
	if err != nil {
		b.Fatal(err)
	}
	data := mem.BufferSlice{mem.SliceBuffer(wire)}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Unmarshal(data, &pb.WriteShareGroupStateRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}
