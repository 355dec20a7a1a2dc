package runtimes

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoKubeLinksNoClientGo: the program built with -tags nokube (make
// demo's build) links no client-go, and the one built without it does
// (so the check can fail).
func TestNoKubeLinksNoClientGo(t *testing.T) {
	tests := []struct {
		desc       string
		tags       []string
		wantClient bool
	}{
		{"make build: every runtime", nil, true},
		{"make demo: -tags nokube", []string{"-tags", "nokube"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			args := append(append([]string{"list"}, tc.tags...), "-deps", "ctrperf/cmd/ctrperf")
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			has := strings.Contains(string(out), "\nk8s.io/client-go/")
			if has != tc.wantClient {
				t.Errorf("go %s: links client-go = %v, want %v", strings.Join(args, " "), has, tc.wantClient)
			}
		})
	}
}
