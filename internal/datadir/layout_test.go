package datadir

import "testing"

// The names of the layout are part of the format: existing data directories are found by them.
func TestLayoutNames(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{PartitionDir("/var/lib/coordinatord", 0), "/var/lib/coordinatord/__share_group_state-0"},
		{PartitionDir("data", 49), "data/__share_group_state-49"},
		{PartitionDir("./data/", 7), "data/__share_group_state-7"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}
