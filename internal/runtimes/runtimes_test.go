package runtimes

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"ctrperf/internal/version"
)

// kubeOnly are the packages only Kubernetes support links: client-go and
// the API types, the CRI client and the grpc under it, klog. A program
// built with -tags nokube (make demo's build) links none of them; each is
// a large part of an empty build cache's compile time.
var kubeOnly = []string{
	"k8s.io/client-go/",
	"k8s.io/api/",
	"k8s.io/apimachinery/",
	"k8s.io/klog/",
	"k8s.io/cri-api/",
	"k8s.io/cri-client/",
	"google.golang.org/grpc",
	"sigs.k8s.io/",
}

// TestNoKubeLinksNoKubernetes: the program built with -tags nokube (make
// demo's build) links none of kubeOnly, and the one built without it links
// each (so the check can fail). A new import that brings one back under
// nokube fails here, with the package that brought it.
func TestNoKubeLinksNoKubernetes(t *testing.T) {
	tests := []struct {
		desc     string
		tags     []string
		wantKube bool
	}{
		{"make build: every runtime", nil, true},
		{"make demo: -tags nokube", []string{"-tags", "nokube"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			args := append(append([]string{"list"}, tc.tags...), "-deps", "-f", "{{.ImportPath}}: {{join .Imports \" \"}}", "ctrperf/cmd/ctrperf")
			out, err := exec.Command("go", args...).CombinedOutput()
			if err != nil {
				t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			}
			for _, prefix := range kubeOnly {
				var importers []string // the packages that import one of prefix
				for _, line := range strings.Split(string(out), "\n") {
					pkg, imports, _ := strings.Cut(line, ": ")
					if strings.HasPrefix(pkg, prefix) {
						continue
					}
					for _, imp := range strings.Fields(imports) {
						if strings.HasPrefix(imp, prefix) {
							importers = append(importers, pkg+" imports "+imp)
							break
						}
					}
				}
				if has := len(importers) > 0; has != tc.wantKube {
					t.Errorf("go %s: links %s* = %v, want %v %v", strings.Join(args, " "), prefix, has, tc.wantKube, importers)
				}
			}
		})
	}
}

// TestNoKubeSaysMakeBuild: a program built with -tags nokube, asked for
// what needs Kubernetes support, says so in version.ErrNoKubernetes's
// words (which name make build) and exits non-zero.
func TestNoKubeSaysMakeBuild(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "ctrperf")
	if out, err := exec.Command("go", "build", "-tags", "nokube", "-o", bin, "ctrperf/cmd/ctrperf").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags nokube: %v\n%s", err, out)
	}
	tests := []struct {
		desc string
		args []string
	}{
		{"the DaemonSet", []string{"isolate", "manifest"}},
		{"the controller on a node's CRI runtime", []string{"isolate", "run", "--cri-socket", "/nonexistent/containerd.sock", "--state-dir", filepath.Join(t.TempDir(), "state")}},
		{"the controllers of a cluster", []string{"isolate", "status", "--kubeconfig", "/nonexistent/kubeconfig"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			out, err := exec.Command(bin, tc.args...).CombinedOutput()
			if err == nil || !strings.Contains(string(out), version.ErrNoKubernetes.Error()) {
				t.Errorf("ctrperf %s: %v, %q; want a failure saying %q", strings.Join(tc.args, " "), err, out, version.ErrNoKubernetes)
			}
		})
	}
}
