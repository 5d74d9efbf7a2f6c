package groupcfg

import (
	"reflect"
	"testing"

	"github.com/coordinatord/coordinatord/internal/kafkaerr"
)

func TestDescribeGroup(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t, keyBrokerDeliveryCountLimit+"=6", keySnapshotCeiling+"=1000"))
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "800")))
	f.mustAlter(t, groupRes("g", set(keyDeliveryCountLimit, "8"), set(keyIsolationLevel, "read_committed")))

	for _, tc := range []struct {
		name  string
		group string
		key   string
		want  DescribedConfig
	}{
		{"set, with a static synonym", "g", keyDeliveryCountLimit, DescribedConfig{
			Name: keyDeliveryCountLimit, Value: "8", EffectiveValue: "8", Source: SourceGroupConfig, Type: TypeInt,
			Synonyms: []Synonym{
				{Name: keyDeliveryCountLimit, Value: "8", Source: SourceGroupConfig},
				{Name: keyBrokerDeliveryCountLimit, Value: "6", Source: SourceStaticBrokerConfig},
				{Name: keyBrokerDeliveryCountLimit, Value: "5", Source: SourceDefaultConfig},
			},
		}},
		// As in Kafka (ConfigHelper.createGroupConfigEntry), the source of an unset key is that of
		// the first synonym: where the inherited value comes from.
		{"unset, inherits a dynamic synonym", "g", keyGroupSnapshotLimit, DescribedConfig{
			Name: keyGroupSnapshotLimit, Value: "800", EffectiveValue: "800", Source: SourceDynamicBrokerConfig, Type: TypeInt,
			Synonyms: []Synonym{
				{Name: keySnapshotCeiling, Value: "800", Source: SourceDynamicBrokerConfig},
				{Name: keySnapshotCeiling, Value: "1000", Source: SourceStaticBrokerConfig},
				{Name: keySnapshotCeiling, Value: "500", Source: SourceDefaultConfig},
			},
		}},
		{"unset, inherits a static synonym", "other", keyDeliveryCountLimit, DescribedConfig{
			Name: keyDeliveryCountLimit, Value: "6", EffectiveValue: "6", Source: SourceStaticBrokerConfig, Type: TypeInt,
			Synonyms: []Synonym{
				{Name: keyBrokerDeliveryCountLimit, Value: "6", Source: SourceStaticBrokerConfig},
				{Name: keyBrokerDeliveryCountLimit, Value: "5", Source: SourceDefaultConfig},
			},
		}},
		{"unset, inherits a default synonym", "g", keyRecordLocks, DescribedConfig{
			Name: keyRecordLocks, Value: "2000", EffectiveValue: "2000", Source: SourceDefaultConfig, Type: TypeInt,
			Synonyms: []Synonym{{Name: keyBrokerRecordLocks, Value: "2000", Source: SourceDefaultConfig}},
		}},
		{"set, no synonym", "g", keyIsolationLevel, DescribedConfig{
			Name: keyIsolationLevel, Value: "read_committed", EffectiveValue: "read_committed", Source: SourceGroupConfig, Type: TypeString,
			Synonyms: []Synonym{
				{Name: keyIsolationLevel, Value: "read_committed", Source: SourceGroupConfig},
				{Name: keyIsolationLevel, Value: "read_uncommitted", Source: SourceDefaultConfig},
			},
		}},
		{"unknown group, no synonym", "nobody", keyDeadLetterTopicName, DescribedConfig{
			Name: keyDeadLetterTopicName, Value: "", EffectiveValue: "", Source: SourceDefaultConfig, Type: TypeString,
			Synonyms: []Synonym{{Name: keyDeadLetterTopicName, Value: "", Source: SourceDefaultConfig}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := f.describeGroupKey(t, tc.group, tc.key)
			if got.Documentation == "" {
				t.Error("no documentation")
			}
			got.Documentation = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}

	// Without flags: no synonyms, no documentation; all non-internal group keys in table order.
	res := f.m.DescribeConfigs([]DescribeResource{{Type: ResourceGroup, Name: "g"}}, false, false)
	if res[0].ErrorCode != kafkaerr.None || len(res[0].Configs) != len(f.m.sch.group) {
		t.Fatalf("describe all: %+v", res[0])
	}
	for i, c := range res[0].Configs {
		if c.Name != f.m.groupDef(i).Name || c.Synonyms != nil || c.Documentation != "" || c.ReadOnly {
			t.Fatalf("config %d: %+v", i, c)
		}
	}
}

func TestDescribeBroker(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t, keyWriteTimeoutMs+"=7000"))
	f.mustAlter(t, brokerRes(set(keySnapshotCeiling, "900")))
	res := f.m.DescribeConfigs([]DescribeResource{
		{Type: ResourceBroker, Name: "1", Keys: []string{keySnapshotCeiling, keyWriteTimeoutMs, "no.such.key", keyDeliveryCountLimit, keySnapshotCeiling, keyPruneIntervalMs}},
	}, true, false)[0]
	want := []DescribedConfig{
		{Name: keySnapshotCeiling, Value: "900", EffectiveValue: "900", Source: SourceDynamicBrokerConfig, Type: TypeInt, Synonyms: []Synonym{
			{Name: keySnapshotCeiling, Value: "900", Source: SourceDynamicBrokerConfig},
			{Name: keySnapshotCeiling, Value: "500", Source: SourceDefaultConfig},
		}},
		{Name: keyWriteTimeoutMs, Value: "7000", EffectiveValue: "7000", ReadOnly: true, Source: SourceStaticBrokerConfig, Type: TypeInt, Synonyms: []Synonym{
			{Name: keyWriteTimeoutMs, Value: "7000", Source: SourceStaticBrokerConfig},
			{Name: keyWriteTimeoutMs, Value: "5000", Source: SourceDefaultConfig},
		}},
		{Name: keyPruneIntervalMs, Value: "300000", EffectiveValue: "300000", ReadOnly: true, Source: SourceDefaultConfig, Type: TypeInt, Synonyms: []Synonym{
			{Name: keyPruneIntervalMs, Value: "300000", Source: SourceDefaultConfig},
		}},
	}
	if res.ErrorCode != kafkaerr.None || !reflect.DeepEqual(res.Configs, want) {
		t.Fatalf("got  %+v\nwant %+v", res.Configs, want)
	}

	all := f.m.DescribeConfigs([]DescribeResource{{Type: ResourceBroker}}, false, true)[0]
	for _, c := range all.Configs {
		d, _ := f.m.sch.lookup(c.Name)
		if d.Scope != ScopeBroker || d.Internal || c.Documentation != d.Doc {
			t.Fatalf("describe all broker keys returned %+v", c)
		}
	}
	if len(all.Configs) != len(f.m.sch.broker)-2 {
		t.Fatalf("%d broker keys described, want all but the 2 internal ones", len(all.Configs))
	}
}

func TestDescribeErrors(t *testing.T) {
	f := openFixture(t, t.TempDir(), staticOf(t))
	res := f.m.DescribeConfigs([]DescribeResource{
		{Type: ResourceTopic, Name: "orders"},
		{Type: ResourceGroup, Name: ""},
		{Type: ResourceBroker, Name: "7"},
		{Type: 9, Name: "x"},
		{Type: ResourceGroup, Name: "g", Keys: []string{keyWriteTimeoutMs}},
	}, false, false)
	for i, code := range []kafkaerr.Code{kafkaerr.InvalidRequest, kafkaerr.InvalidRequest, kafkaerr.InvalidRequest, kafkaerr.InvalidRequest, kafkaerr.None} {
		if res[i].ErrorCode != code || (code != kafkaerr.None && res[i].ErrorMessage == "") {
			t.Errorf("resource %d: %+v, want %s", i, res[i], code)
		}
	}
	if len(res[4].Configs) != 0 {
		t.Errorf("a broker key described on a GROUP resource: %+v", res[4].Configs)
	}
}
