package load

import (
	"fmt"
	"os"
	"testing"
)

// TestMain runs every test twice: with the event loops where a closed loop
// fits them (evloop.go), then with one goroutine per VU everywhere, so that
// both paths meet the same servers and the same expectations.
func TestMain(m *testing.M) {
	if code := m.Run(); code != 0 {
		os.Exit(code)
	}
	fmt.Println("load: the same tests with one goroutine per VU (no event loops)")
	testNoLoop = true
	os.Exit(m.Run())
}
