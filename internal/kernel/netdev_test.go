package kernel

import (
	"strings"
	"testing"
)

func TestParseNetDev(t *testing.T) {
	in := `Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:    1000      10    0    0    0     0          0         0     1000      10    0    0    0     0       0          0
  eth0: 5524432   41923    1    2    0     0          0         0  9876543   51234    3    4    0     0       0          0
`
	devs, err := ParseNetDev(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 2 || devs[1] != (NetDev{Name: "eth0", RxBytes: 5524432, RxPackets: 41923, RxErrors: 1, RxDrops: 2,
		TxBytes: 9876543, TxPackets: 51234, TxErrors: 3, TxDrops: 4}) {
		t.Errorf("parsed %+v", devs)
	}
	if _, err := ParseNetDev(strings.NewReader("h\nh\neth0 1 2 3\n")); err == nil {
		t.Error("a line without a colon parsed")
	}
	if _, err := ParseNetDev(strings.NewReader("h\nh\neth0: 1 2 3\n")); err == nil {
		t.Error("a short line parsed")
	}
}
