//go:build !nokube

package manifest

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"ctrperf/internal/labels"
)

var update = flag.Bool("update", false, "rewrite contrib/kubernetes/ctrperf-isolate.yaml")

// docs strict-decodes the manifest into the API's types: a field the API
// does not have is an error, not a silently dropped key.
func docs(t *testing.T, b []byte) (*corev1.Namespace, *corev1.ServiceAccount, *appsv1.DaemonSet) {
	t.Helper()
	parts := bytes.Split(b, []byte("\n---\n"))
	if len(parts) != 4 {
		t.Fatalf("%d documents, want a header and 3", len(parts)-1)
	}
	var ns corev1.Namespace
	var sa corev1.ServiceAccount
	var ds appsv1.DaemonSet
	for i, into := range []any{&ns, &sa, &ds} {
		if err := yaml.UnmarshalStrict(parts[i+1], into); err != nil {
			t.Fatalf("document %d: %v", i+1, err)
		}
	}
	return &ns, &sa, &ds
}

func TestShippedManifestIsTheCommandsOutput(t *testing.T) {
	b, err := YAML(Defaults())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "..", "..", "contrib", "kubernetes", "ctrperf-isolate.yaml")
	if *update {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	shipped, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(shipped, b) {
		t.Errorf("%s differs from `ctrperf isolate manifest` (go test ./internal/isolate/manifest -args -update)", path)
	}
	docs(t, shipped)
}

func TestManifestNodeAgent(t *testing.T) {
	o := Defaults()
	o.CRISocket = "/run/ctrperf/kube/$(NODE_NAME)/containerd.sock"
	o.KubeletDir = "/var/lib/ctrperf/kube/nodes/$(NODE_NAME)/kubelet"
	o.Args = []string{"--hot-after", "3"}
	b, err := YAML(o)
	if err != nil {
		t.Fatal(err)
	}
	ns, sa, ds := docs(t, b)
	if ns.Name != o.Namespace || sa.Namespace != o.Namespace || ds.Namespace != o.Namespace {
		t.Errorf("objects in %q, %q, %q", ns.Name, sa.Namespace, ds.Namespace)
	}
	if sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
		t.Errorf("the ServiceAccount mounts a token: the controller needs no API access")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || spec.ServiceAccountName != Name || len(spec.Tolerations) != 1 || spec.Tolerations[0].Operator != corev1.TolerationOpExists {
		t.Errorf("pod spec: hostPID %v, sa %q, tolerations %v", spec.HostPID, spec.ServiceAccountName, spec.Tolerations)
	}
	for k := range ds.Spec.Template.Labels {
		if k == labels.Isolate || k == labels.Managed {
			t.Errorf("the controller's pods carry %s: they would opt in, or be taken for a bench's", k)
		}
	}
	c := spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image pull policy %s: no registry", c.ImagePullPolicy)
	}
	args := strings.Join(c.Args, " ")
	for _, want := range []string{"--cri-socket " + o.CRISocket, "--kubelet-dir " + o.KubeletDir, "--hot-after 3", "--irq=false"} {
		if !strings.Contains(args, want) {
			t.Errorf("args %q lack %q", args, want)
		}
	}
	// Every path the controller reads is under a mount of the node's, with
	// $(NODE_NAME) left to kubelet.
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[m.MountPath] = m.Name
	}
	for _, want := range []string{"/sys/fs/cgroup", "/run/ctrperf/kube", "/var/lib/ctrperf/kube/nodes", "/run/ctrperf/isolate-node"} {
		if _, ok := mounted[want]; !ok {
			t.Errorf("no mount of %s: %v", want, mounted)
		}
	}
	for _, v := range spec.Volumes {
		if v.HostPath == nil || strings.Contains(v.HostPath.Path, "$(") {
			t.Errorf("volume %s: %+v", v.Name, v.HostPath)
		}
	}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName"
	}) {
		t.Errorf("no NODE_NAME from the downward API")
	}
}

func TestManifestRefusesBadPaths(t *testing.T) {
	for _, bad := range []func(*Options){
		func(o *Options) { o.CRISocket = "containerd.sock" },
		func(o *Options) { o.StateDir = "/$(NODE_NAME)" },
		func(o *Options) { o.Image = "" },
	} {
		o := Defaults()
		bad(&o)
		if _, err := YAML(o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}
