package record

import "testing"

func TestTopicID(t *testing.T) {
	tests := []struct {
		in      string
		wantErr bool
	}{
		{"P6hfZFcXRWKz_CyWP2avpg", false},
		{"AAAAAAAAAAAAAAAAAAAAAA", false},
		{"_____________________w", false},
		{"_____________________x", true}, // non-zero trailing bits: not canonical
		{"P6hfZFcXRWKz_CyWP2avpg==", true},
		{"P6hfZFcXRWKz+CyWP2avpg", true}, // standard alphabet
		{"short", true},
		{"", true},
	}
	for _, tt := range tests {
		id, err := ParseTopicID(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseTopicID(%q) err = %v, wantErr %v", tt.in, err, tt.wantErr)
			continue
		}
		if err == nil && id.String() != tt.in {
			t.Errorf("String() = %q, want %q", id.String(), tt.in)
		}
	}
	// Most-significant byte first, as Kafka's Uuid.
	if got := (TopicID{15: 1}).String(); got != "AAAAAAAAAAAAAAAAAAAAAQ" {
		t.Errorf("Uuid(0,1) = %q", got)
	}
}
