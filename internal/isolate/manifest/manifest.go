//go:build !nokube

package manifest

import (
	"bytes"
	"fmt"
	"path"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// Objects are the Namespace, the ServiceAccount and the DaemonSet.
func Objects(o Options) (*corev1.Namespace, *corev1.ServiceAccount, *appsv1.DaemonSet, error) {
	for _, p := range []struct{ name, v string }{{"--cri-socket", o.CRISocket}, {"--kubelet-dir", o.KubeletDir}, {"--state-dir", o.StateDir}} {
		if !path.IsAbs(p.v) {
			return nil, nil, nil, fmt.Errorf("%s %q: want an absolute path on the node", p.name, p.v)
		}
		if hostDir(p.v) == "/" {
			return nil, nil, nil, fmt.Errorf("%s %q: its directory would be the node's /", p.name, p.v)
		}
	}
	if o.Namespace == "" || o.Image == "" {
		return nil, nil, nil, fmt.Errorf("a namespace and an image are needed")
	}
	// Not ctrperf.managed (bench's objects, which clean removes) and not
	// ctrperf.isolate (which would opt the controller in).
	lbl := map[string]string{AppLabel: Name, "app.kubernetes.io/part-of": "ctrperf"}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: lbl}
	}
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: o.Namespace, Labels: lbl}}
	no := false
	// The controller reads its node's runtime and kernel only: it needs no
	// API access, so its ServiceAccount has no role and no token.
	sa := &corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: meta(Name), AutomountServiceAccountToken: &no}

	dirs := map[string]bool{}
	var mounts []corev1.VolumeMount
	var vols []corev1.Volume
	mount := func(name, host string, ro bool, t corev1.HostPathType) {
		if dirs[host] {
			return
		}
		dirs[host] = true
		mounts = append(mounts, corev1.VolumeMount{Name: name, MountPath: host, ReadOnly: ro})
		vols = append(vols, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host, Type: &t}}})
	}
	mount("cgroup", "/sys/fs/cgroup", false, corev1.HostPathDirectory)
	mount("runtime", hostDir(o.CRISocket), false, corev1.HostPathDirectory)
	mount("kubelet", hostDir(o.KubeletDir), true, corev1.HostPathDirectory)
	mount("state", hostDir(o.StateDir), false, corev1.HostPathDirectoryOrCreate)

	args := []string{"isolate", "run",
		"--cri-socket", o.CRISocket, "--kubelet-dir", o.KubeletDir, "--state-dir", o.StateDir,
		"--metrics", fmt.Sprintf("0.0.0.0:%d", o.MetricsPort),
		// IRQs and RPS masks are the machine's: one controller per machine
		// may steer them (--irq=true --rps=true where a node is a machine).
		"--irq=false", "--rps=false"}
	args = append(args, o.Args...)
	priv := true
	grace := int64(30)
	ds := &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"}, ObjectMeta: meta(Name),
		Spec: appsv1.DaemonSetSpec{
			Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{AppLabel: Name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: lbl},
				Spec: corev1.PodSpec{
					ServiceAccountName:            Name,
					AutomountServiceAccountToken:  &no,
					HostPID:                       true,
					PriorityClassName:             "system-node-critical",
					TerminationGracePeriodSeconds: &grace,
					Tolerations:                   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers: []corev1.Container{{
						Name: "isolate", Image: o.Image, ImagePullPolicy: corev1.PullNever,
						Command: []string{"/ctrperf"}, Args: args,
						Env: []corev1.EnvVar{{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
						Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: int32(o.MetricsPort)}},
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
							Path: "/status", Port: intstr.FromString("metrics")}}, PeriodSeconds: 5},
						// No preStop: SIGTERM restores every value before the
						// process exits, within the grace period; a pod that
						// crashed leaves its checkpoint on the node, and the next
						// one restores it before it decides anything.
						SecurityContext: &corev1.SecurityContext{Privileged: &priv},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: mustQ("20m"), corev1.ResourceMemory: mustQ("32Mi")},
							Limits: corev1.ResourceList{corev1.ResourceMemory: mustQ("256Mi")}},
						VolumeMounts: mounts,
					}},
					Volumes: vols,
				},
			},
		}}
	return ns, sa, ds, nil
}

// hostDir is the directory of p to mount: the part before any $(VAR), or
// p's parent (a socket is mounted through its directory).
func hostDir(p string) string {
	if i := strings.Index(p, "$("); i >= 0 {
		return path.Clean(path.Dir(p[:i] + "x"))
	}
	if strings.HasSuffix(p, ".sock") {
		return path.Dir(p)
	}
	return path.Clean(p)
}

// YAML is the manifest: one document per object, with a header that says
// how it was made and how to apply it.
func YAML(o Options) ([]byte, error) {
	ns, sa, ds, err := Objects(o)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("# ctrperf isolate on every node: `ctrperf isolate manifest | kubectl apply -f -`.\n")
	b.WriteString("# Pods opt in with the label ctrperf.isolate: \"true\"; their CPU request is\n")
	b.WriteString("# their entitlement. On a node whose kubelet runs the static CPU manager\n")
	b.WriteString("# the controller writes no cpuset, it only demotes. Deleting the DaemonSet\n")
	b.WriteString("# restores every value it changed (SIGTERM).\n")
	for _, obj := range []any{ns, sa, ds} {
		j, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		// An object to apply has no status (the types print an empty one).
		var m map[string]any
		if err := yaml.Unmarshal(j, &m); err != nil {
			return nil, err
		}
		delete(m, "status")
		if spec, ok := m["spec"].(map[string]any); ok && len(spec) == 0 {
			delete(m, "spec")
		}
		y, err := yaml.Marshal(m)
		if err != nil {
			return nil, err
		}
		b.WriteString("---\n")
		b.Write(y)
	}
	return b.Bytes(), nil
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
