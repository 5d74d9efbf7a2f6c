package service

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/coordinatord/coordinatord/internal/groupcfg"
	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

const snapshotOverride = "share.snapshot.update.records.per.snapshot"
const snapshotCeiling = "share.coordinator.snapshot.update.records.per.snapshot"

func alter(typ pb.ResourceType, name string, op pb.ConfigOperation, key string, value *string) *pb.AlterConfigsResource {
	return &pb.AlterConfigsResource{ResourceType: typ, ResourceName: name,
		Configs: []*pb.AlterableConfig{{Name: key, ConfigOperation: op, Value: value}}}
}

func TestIncrementalAlterConfigs(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	cases := []struct {
		name         string
		res          *pb.AlterConfigsResource
		validateOnly bool
		code         pb.ErrorCode
		msg          []string
	}{
		{"group override in range", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("300")),
			false, pb.ErrorCode_ERROR_CODE_NONE, nil},
		{"group override above ceiling", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("501")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"501", "200", "500"}},
		{"group override below floor", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("199")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"199", "200"}},
		{"unknown key", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, "share.no.such.key", proto.String("1")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"share.no.such.key"}},
		{"wrong type", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, "share.delivery.count.limit", proto.String("five")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"five"}},
		{"append to a non-list", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_APPEND, "share.delivery.count.limit", proto.String("3")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"APPEND"}},
		{"unspecified operation", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g1", pb.ConfigOperation_CONFIG_OPERATION_UNSPECIFIED, "share.delivery.count.limit", proto.String("3")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, nil},
		{"topic resource", alter(pb.ResourceType_RESOURCE_TYPE_TOPIC, "t", pb.ConfigOperation_CONFIG_OPERATION_SET, "retention.ms", proto.String("1")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_REQUEST, []string{"TOPIC"}},
		{"broker ceiling", alter(pb.ResourceType_RESOURCE_TYPE_BROKER, "1", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotCeiling, proto.String("800")),
			false, pb.ErrorCode_ERROR_CODE_NONE, nil},
		{"broker ceiling out of range", alter(pb.ResourceType_RESOURCE_TYPE_BROKER, "", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotCeiling, proto.String("1001")),
			false, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG, []string{"1001", "200", "1000"}},
		{"validate only", alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g2", pb.ConfigOperation_CONFIG_OPERATION_SET, snapshotOverride, proto.String("700")),
			true, pb.ErrorCode_ERROR_CODE_NONE, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{
				Resources: []*pb.AlterConfigsResource{tc.res}, ValidateOnly: tc.validateOnly})
			if err != nil {
				t.Fatal(err)
			}
			got := resp.GetResponses()[0]
			if got.GetErrorCode() != tc.code || got.GetResourceName() != tc.res.ResourceName || got.GetResourceType() != tc.res.ResourceType {
				t.Fatalf("response = %v, want %v for %s/%s", got, tc.code, tc.res.ResourceType, tc.res.ResourceName)
			}
			for _, m := range tc.msg {
				if !strings.Contains(got.GetErrorMessage(), m) {
					t.Errorf("message %q does not mention %q", got.GetErrorMessage(), m)
				}
			}
		})
	}

	// g1's override is in force, g2's validate-only change was not stored, and the ceiling is
	// the dynamic 800.
	desc, err := ts.config.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{
		Resources: []*pb.DescribeConfigsResource{
			{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "g1", ConfigurationKeys: []string{snapshotOverride}},
			{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "g2", ConfigurationKeys: []string{snapshotOverride}},
			{ResourceType: pb.ResourceType_RESOURCE_TYPE_BROKER, ResourceName: "1", ConfigurationKeys: []string{snapshotCeiling}},
		},
		IncludeSynonyms: true, IncludeDocumentation: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		value  string
		source pb.ConfigSource
	}{
		{"300", pb.ConfigSource_CONFIG_SOURCE_GROUP_CONFIG},
		{"800", pb.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG}, // inherited from the dynamic ceiling, as Kafka reports it
		{"800", pb.ConfigSource_CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG},
	}
	for i, r := range desc.GetResults() {
		if r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE || len(r.GetConfigs()) != 1 {
			t.Fatalf("describe %d = %v", i, r)
		}
		c := r.GetConfigs()[0]
		if c.GetValue() != want[i].value || c.GetEffectiveValue() != want[i].value || c.GetConfigSource() != want[i].source {
			t.Errorf("describe %s: value %q effective %q source %v; want %q %v", r.GetResourceName(),
				c.GetValue(), c.GetEffectiveValue(), c.GetConfigSource(), want[i].value, want[i].source)
		}
		if c.GetDocumentation() == "" || c.GetConfigType() != pb.ConfigType_CONFIG_TYPE_INT {
			t.Errorf("describe %s: documentation %q type %v", r.GetResourceName(), c.GetDocumentation(), c.GetConfigType())
		}
	}
	if syn := desc.GetResults()[0].GetConfigs()[0].GetSynonyms(); len(syn) < 2 || syn[1].GetName() != snapshotCeiling {
		t.Errorf("g1 synonyms = %v, want the group override then %s", syn, snapshotCeiling)
	}

	// The shards see the override at once: provider lookups return the effective value.
	if got := ts.cfg.SnapshotUpdateRecordsPerSnapshot("g1"); got != 300 {
		t.Errorf("provider limit for g1 = %d, want 300", got)
	}
	if got := ts.cfg.SnapshotUpdateRecordsPerSnapshot("g2"); got != 800 {
		t.Errorf("provider limit for g2 = %d, want the ceiling 800", got)
	}
}

// TestAlterIsAtomicPerResource: one bad change rejects the whole resource, other resources of
// the same request still apply.
func TestAlterIsAtomicPerResource(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	resp, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
		{ResourceType: pb.ResourceType_RESOURCE_TYPE_GROUP, ResourceName: "bad", Configs: []*pb.AlterableConfig{
			{Name: "share.delivery.count.limit", ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: proto.String("4")},
			{Name: snapshotOverride, ConfigOperation: pb.ConfigOperation_CONFIG_OPERATION_SET, Value: proto.String("5000")},
		}},
		alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "good", pb.ConfigOperation_CONFIG_OPERATION_SET, "share.delivery.count.limit", proto.String("4")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.GetResponses()[0].GetErrorCode(); c != pb.ErrorCode_ERROR_CODE_INVALID_CONFIG {
		t.Fatalf("bad resource: %v", resp.GetResponses()[0])
	}
	if c := resp.GetResponses()[1].GetErrorCode(); c != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("good resource: %v", resp.GetResponses()[1])
	}
	if got := deliveryCountLimit(t, ts, "bad"); got != 5 {
		t.Errorf("bad group's delivery count limit = %d, want the default 5 (nothing applied)", got)
	}
	if got := deliveryCountLimit(t, ts, "good"); got != 4 {
		t.Errorf("good group's delivery count limit = %d, want 4", got)
	}
}

// TestUnknownEnumValues: resource types and operations the API does not define are refused and
// echoed as sent, never folded onto a defined one (the API's enums are 32-bit; 288 is GROUP (32)
// plus 256 and 257 is SET (1) plus 256).
func TestUnknownEnumValues(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx := ctxT(t)
	resp, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
		alter(pb.ResourceType(288), "g1", pb.ConfigOperation_CONFIG_OPERATION_SET, "share.delivery.count.limit", proto.String("7")),
		alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g2", pb.ConfigOperation(257), "share.delivery.count.limit", proto.String("7")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct {
		typ  pb.ResourceType
		code pb.ErrorCode
	}{
		{pb.ResourceType(288), pb.ErrorCode_ERROR_CODE_INVALID_REQUEST},
		{pb.ResourceType_RESOURCE_TYPE_GROUP, pb.ErrorCode_ERROR_CODE_INVALID_CONFIG},
	} {
		if got := resp.GetResponses()[i]; got.GetResourceType() != want.typ || got.GetErrorCode() != want.code {
			t.Errorf("alter %d: %v, want resource type %d and %v", i, got, want.typ, want.code)
		}
	}
	for _, g := range []string{"g1", "g2"} {
		if got := deliveryCountLimit(t, ts, g); got != 5 {
			t.Errorf("%s's delivery count limit = %d, want the default 5 (nothing applied)", g, got)
		}
	}
	desc, err := ts.config.DescribeConfigs(ctx, &pb.DescribeConfigsRequest{Resources: []*pb.DescribeConfigsResource{
		{ResourceType: pb.ResourceType(288), ResourceName: "g1"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got := desc.GetResults()[0]; got.GetResourceType() != pb.ResourceType(288) ||
		got.GetErrorCode() != pb.ErrorCode_ERROR_CODE_INVALID_REQUEST || len(got.GetConfigs()) != 0 {
		t.Errorf("describe of resource type 288: %v, want INVALID_REQUEST", got)
	}
}

// deliveryCountLimit returns the share.delivery.count.limit in force for group, as DescribeConfigs
// shows it.
func deliveryCountLimit(t *testing.T, ts *testServer, group string) int {
	t.Helper()
	const key = "share.delivery.count.limit"
	res := ts.cfg.DescribeConfigs([]groupcfg.DescribeResource{{Type: groupcfg.ResourceGroup, Name: group, Keys: []string{key}}}, false, false)
	if len(res) != 1 || len(res[0].Configs) != 1 {
		t.Fatalf("describe %s of group %s: %+v", key, group, res)
	}
	n, err := strconv.Atoi(res[0].Configs[0].EffectiveValue)
	if err != nil {
		t.Fatalf("%s of group %s: %v", key, group, err)
	}
	return n
}

// TestAlterPassesTheRequestContext: the handler hands the RPC's context to the configuration, so
// that a request whose context ended before its change is applied is refused, per resource, and
// not applied.
func TestAlterPassesTheRequestContext(t *testing.T) {
	ts := startServer(t, testOptions{})
	ctx, cancel := context.WithCancel(ctxT(t))
	cancel()
	resp, err := NewConfigServer(ts.cfg, ConfigOptions{}).IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: []*pb.AlterConfigsResource{
		alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g", pb.ConfigOperation_CONFIG_OPERATION_SET, "share.delivery.count.limit", proto.String("4")),
	}})
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.GetResponses()[0]; r.GetErrorCode() != pb.ErrorCode_ERROR_CODE_REQUEST_TIMED_OUT || !strings.Contains(r.GetErrorMessage(), "nothing was changed") {
		t.Fatalf("alter with a cancelled context: %v", r)
	}
	if got := deliveryCountLimit(t, ts, "g"); got != 5 {
		t.Fatalf("delivery count limit = %d after a refused change, want the default 5", got)
	}
}

// TestAlterRequestSizeBounded: a request that alters more resources than
// max.alter.config.resources.per.request allows is refused whole and changes nothing.
func TestAlterRequestSizeBounded(t *testing.T) {
	ts := startServer(t, testOptions{overrides: []string{"max.alter.config.resources.per.request=3"}})
	ctx := ctxT(t)
	var resources []*pb.AlterConfigsResource
	for i := range 4 {
		resources = append(resources, alter(pb.ResourceType_RESOURCE_TYPE_GROUP, "g"+strconv.Itoa(i),
			pb.ConfigOperation_CONFIG_OPERATION_SET, "share.delivery.count.limit", proto.String("4")))
	}
	_, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: resources})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "the request alters 4 resources; at most 3 are allowed per request (max.alter.config.resources.per.request)") {
		t.Fatalf("alter of 4 resources with a bound of 3: %v", err)
	}
	if got := deliveryCountLimit(t, ts, "g0"); got != 5 {
		t.Fatalf("g0's delivery count limit = %d after a refused request, want the default 5", got)
	}
	resp, err := ts.config.IncrementalAlterConfigs(ctx, &pb.IncrementalAlterConfigsRequest{Resources: resources[:3]})
	if err != nil || resp.GetResponses()[2].GetErrorCode() != pb.ErrorCode_ERROR_CODE_NONE {
		t.Fatalf("alter of 3 resources: %v, %v", resp, err)
	}
}
