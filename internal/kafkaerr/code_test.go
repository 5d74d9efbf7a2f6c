package kafkaerr

import (
	"strings"
	"testing"

	pb "github.com/coordinatord/coordinatord/proto/sharecoord/v1"
)

// TestSameCodesAsTheAPI checks that the API's ErrorCode enum and this package list the same codes
// under the same names, both ways: the service converts one into the other by number.
func TestSameCodesAsTheAPI(t *testing.T) {
	for n, name := range pb.ErrorCode_name {
		c := Code(n)
		if int32(c) != n {
			t.Errorf("enum value %s = %d does not fit a Code", name, n)
		}
		if want := strings.TrimPrefix(name, "ERROR_CODE_"); !c.Known() || c.String() != want {
			t.Errorf("enum value %s = %d: Code(%d) is %s, want %s", name, n, n, c, want)
		}
	}
	for c, name := range names {
		if got, ok := pb.ErrorCode_name[int32(c)]; !ok || got != "ERROR_CODE_"+name {
			t.Errorf("%s = %d: the API's enum has %q for it", name, int(c), got)
		}
	}
}

func TestDefaultMessages(t *testing.T) {
	for c := range names {
		if msg := c.DefaultMessage(); (msg == "") != (c == None) {
			t.Errorf("%s: default message %q", c, msg)
		}
	}
	if c := Code(99); c.Known() || c.String() != "ERROR_CODE(99)" || c.DefaultMessage() != "" {
		t.Errorf("unknown code: Known %v, String %q, DefaultMessage %q", c.Known(), c.String(), c.DefaultMessage())
	}
}
