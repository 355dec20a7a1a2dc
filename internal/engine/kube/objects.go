package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"path"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"ctrperf/internal/engine"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
)

// What a pod of ctrperf's carries, beyond the labels of every ctrperf
// object (labels.Managed, labels.Run, labels.Service).
const (
	// labelPod selects one service's pod (its Service's selector).
	labelPod = "ctrperf.pod"
	// Owner annotations of a session's namespace: `ctrperf clean` removes
	// a namespace whose owner process is gone, and only on the owner's
	// host, so a live session (of this machine or another) keeps its own.
	AnnotationHost      = "ctrperf.owner.host"
	AnnotationPID       = "ctrperf.owner.pid"
	AnnotationStartTime = "ctrperf.owner.start-time" // clock ticks after boot, /proc/PID/stat field 22
	AnnotationStarted   = "ctrperf.owner.started"    // RFC 3339, for people
	AnnotationCommand   = "ctrperf.owner.command"
	// AnnotationMachineID (/etc/machine-id) tells two machines apart that
	// share a hostname; AnnotationBootID (the kernel's boot id) says
	// whether the owner's PID still means the same process: after a
	// reboot of the owner's machine, the owner is gone.
	AnnotationMachineID = "ctrperf.owner.machine-id"
	AnnotationBootID    = "ctrperf.owner.boot-id"
	// AnnotationRun is the unshortened run id of an object whose label
	// had to be shortened.
	AnnotationRun = "ctrperf.run"
	// HostPathRoot is where hostpath and local-pv data directories live on
	// a node: <root>/<namespace>/<run>/<service>.
	HostPathRoot = "/var/lib/ctrperf/kube-data"
	// gracePeriod: a benchmark's pods need no graceful shutdown; a short
	// one makes each teardown seconds, not half a minute.
	gracePeriod = 1
)

// Owner is the process a session's namespace belongs to.
type Owner struct {
	Host      string
	MachineID string // "" when the machine has none
	BootID    string
	PID       int
	StartTime uint64
	Started   metav1.Time
	Command   string
}

// Made says whether a namespace's annotations name this owner: the same
// process (pid and start time) of the same boot of the same machine.
func (o Owner) Made(a map[string]string) bool {
	return a[AnnotationPID] == strconv.Itoa(o.PID) && a[AnnotationHost] == o.Host &&
		a[AnnotationMachineID] == o.MachineID && a[AnnotationBootID] == o.BootID &&
		a[AnnotationStartTime] == strconv.FormatUint(o.StartTime, 10)
}

var dnsLabelBad = regexp.MustCompile(`[^a-z0-9-]+`)

// NamespaceName is the namespace of a session: ctrperf-<session>, as a
// DNS label (lower case, at most 63 characters; a long session keeps a
// hash of itself).
func NamespaceName(session string) string {
	return dnsLabel(engine.NamePrefix+"-"+session, 63)
}

// dnsLabel makes s a DNS-1123 label of at most max characters; when it had
// to be changed beyond lower-casing, a hash of s keeps it unique.
func dnsLabel(s string, max int) string {
	l := dnsLabelBad.ReplaceAllString(strings.ToLower(s), "-")
	l = strings.Trim(l, "-")
	if len(l) > max {
		h := shortHash(s)
		l = strings.TrimRight(l[:max-len(h)-1], "-") + "-" + h
	}
	if l == "" {
		l = "x" + shortHash(s)
	}
	return l
}

// labelValue makes s a label value (at most 63 of [A-Za-z0-9_.-], starting
// and ending alphanumeric); a long one keeps a hash.
func labelValue(s string) string {
	if len(s) <= 63 && labelValueRe.MatchString(s) {
		return s
	}
	v := labelValueBad.ReplaceAllString(s, "-")
	if len(v) > 63 {
		v = v[:63-8] + "-" + shortHash(s)
	}
	return strings.Trim(v, "-_.")
}

var (
	labelValueRe  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?$`)
	labelValueBad = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
)

func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])[:7]
}

// PodName is the pod of a run's service: <service>-<hash of the run id>
// (several instances of a run share the session's namespace).
func PodName(runID, service string) string {
	return dnsLabel(service, 50) + "-" + shortHash(runID)
}

// runLabels are the labels of every object of a run.
func runLabels(runID string) map[string]string {
	return map[string]string{labels.Managed: "true", labels.Run: labelValue(runID)}
}

// namespace is the session's namespace, labelled and annotated with its
// owner.
func namespace(name, session string, o Owner) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{labels.Managed: "true", labels.Run: labelValue(session)},
		Annotations: map[string]string{
			AnnotationRun:       session,
			AnnotationHost:      o.Host,
			AnnotationMachineID: o.MachineID,
			AnnotationBootID:    o.BootID,
			AnnotationPID:       strconv.Itoa(o.PID),
			AnnotationStartTime: strconv.FormatUint(o.StartTime, 10),
			AnnotationStarted:   o.Started.UTC().Format("2006-01-02T15:04:05Z"),
			AnnotationCommand:   o.Command,
		},
	}}
}

// podSpec is what a deployment asks of one service's pod: the knobs of the
// configuration that shape it.
type podSpec struct {
	Namespace string
	RunID     string
	Network   plan.NetworkMode
	Data      plan.DataPlacement
	Kube      plan.KubeSpec
	// Node pins the pod (kubernetes.node, or where a local PV lives).
	Node string
	// Nodes, without Node, are the nodes the pod may go to (qos
	// guaranteed: those whose kubelet runs the static CPU manager).
	Nodes []string
	// Claim is the PersistentVolumeClaim of a local-pv placement.
	Claim string
}

// Pod builds the pod of service s with its templates already expanded
// (cmd, env). Pure, so that what each knob does is tested without a
// cluster.
func Pod(ps podSpec, s engine.Service, cmd, entry []string, env map[string]string) (*corev1.Pod, error) {
	name := PodName(ps.RunID, s.Name)
	lb := map[string]string{}
	for k, v := range s.Labels {
		lb[k] = labelValue(v)
	}
	for k, v := range runLabels(ps.RunID) {
		lb[k] = v
	}
	lb[labels.Service] = labelValue(s.Name)
	lb[labelPod] = name
	res, err := Resources(s.Resources, ps.Kube.QoS)
	if err != nil {
		return nil, fmt.Errorf("service %q: %w", s.Name, err)
	}
	c := corev1.Container{
		Name:            dnsLabel(s.Name, 63),
		Image:           s.Image,
		Command:         entry,
		Args:            cmd,
		ImagePullPolicy: corev1.PullNever, // no registry: images are loaded onto the nodes
		Resources:       res,
	}
	for _, k := range sortedKeys(env) {
		c.Env = append(c.Env, corev1.EnvVar{Name: k, Value: env[k]})
	}
	for _, p := range s.Ports {
		cp := corev1.ContainerPort{ContainerPort: int32(p), Protocol: corev1.ProtocolTCP}
		if ps.Network == plan.NetworkHostNetwork {
			cp.HostPort = int32(p)
		}
		c.Ports = append(c.Ports, cp)
	}
	if s.Privileged || s.User != "" {
		c.SecurityContext = &corev1.SecurityContext{}
		if s.Privileged {
			t := true
			c.SecurityContext.Privileged = &t
		}
		if s.User != "" {
			uid, err := strconv.ParseInt(s.User, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("service %q: user %q: a pod runs as a numeric uid (runAsUser); Kubernetes does not look names up in the image", s.Name, s.User)
			}
			c.SecurityContext.RunAsUser = &uid
		}
	}
	grace := int64(gracePeriod)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ps.Namespace, Labels: lb,
			Annotations: map[string]string{AnnotationRun: ps.RunID}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever, // a crash fails the run; never a silent restart mid-measurement
			TerminationGracePeriodSeconds: &grace,
			HostNetwork:                   ps.Network == plan.NetworkHostNetwork,
			EnableServiceLinks:            new(false),
			AutomountServiceAccountToken:  new(false),
		},
	}
	nodes := ps.Nodes
	if ps.Node != "" {
		nodes = []string{ps.Node}
	}
	if len(nodes) > 0 {
		// Through the scheduler (not nodeName), so that a pod that cannot
		// go there is Pending with the scheduler's reason.
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}},
			}}},
		}}
	}
	if s.DataDir != "" && ps.Data != plan.DataLayer {
		vol, err := dataVolume(ps, s)
		if err != nil {
			return nil, err
		}
		pod.Spec.Volumes = append(pod.Spec.Volumes, vol)
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol.Name, MountPath: s.DataDir})
	}
	pod.Spec.Containers = []corev1.Container{c}
	return pod, nil
}

// HostPathDir is where a hostpath or local-pv placement keeps a service's
// data on its node.
func HostPathDir(namespace, runID, service string) string {
	return path.Join(HostPathRoot, namespace, dnsLabel(runID, 63), dnsLabel(service, 63))
}

func dataVolume(ps podSpec, s engine.Service) (corev1.Volume, error) {
	v := corev1.Volume{Name: "data"}
	switch ps.Data {
	case plan.DataEmptyDir:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{}
	case plan.DataEmptyDirMemory:
		v.EmptyDir = &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}
	case plan.DataHostPath:
		t := corev1.HostPathDirectoryOrCreate
		v.HostPath = &corev1.HostPathVolumeSource{Path: HostPathDir(ps.Namespace, ps.RunID, s.Name), Type: &t}
	case plan.DataLocalPV:
		if ps.Claim == "" {
			return v, fmt.Errorf("service %q: data local-pv without its claim", s.Name)
		}
		v.PersistentVolumeClaim = &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ps.Claim}
	default:
		return v, fmt.Errorf("service %q: data %q is not a placement of runtime kubernetes", s.Name, ps.Data)
	}
	return v, nil
}

// Resources turns a configuration's resources into requests and limits
// for its QoS class:
//
//   - "" (the default): resources are limits (CFS quota and memory limit,
//     as docker's --cpus and -m) and Kubernetes defaults the requests to
//     them: Guaranteed when both are set, Burstable with one;
//   - guaranteed: requests = limits, whole CPUs (the static CPU manager
//     pins them); both are required;
//   - burstable: the limits as given, a CPU request of 100m (or the
//     limit, if smaller) and the memory request equal to its limit;
//   - besteffort: none.
//
// A service the workload gives no resources (a load generator's pod, a
// noisy tenant left unpinned) is BestEffort whatever the class: the
// configuration's resources are its other services'.
func Resources(r plan.Resources, qos string) (corev1.ResourceRequirements, error) {
	var out corev1.ResourceRequirements
	if r.CPUSet != "" || r.CPUShares != 0 {
		return out, fmt.Errorf("cpuset and cpu_shares do not exist for a pod (use cpus, and kubernetes.qos guaranteed for pinned CPUs)")
	}
	if r == (plan.Resources{}) {
		return out, nil
	}
	if qos == "besteffort" {
		if r.CPUs != 0 || r.MemoryBytes != 0 {
			return out, fmt.Errorf("qos besteffort with resources: a BestEffort pod has no requests or limits")
		}
		return out, nil
	}
	list := corev1.ResourceList{}
	if r.CPUs > 0 {
		if qos == "guaranteed" && r.CPUs != math.Trunc(r.CPUs) {
			return out, fmt.Errorf("qos guaranteed with %g CPUs: the static CPU manager pins whole CPUs only", r.CPUs)
		}
		list[corev1.ResourceCPU] = *resource.NewMilliQuantity(int64(math.Round(r.CPUs*1000)), resource.DecimalSI)
	}
	if r.MemoryBytes > 0 {
		list[corev1.ResourceMemory] = *resource.NewQuantity(r.MemoryBytes, resource.BinarySI)
	}
	switch qos {
	case "guaranteed":
		if r.CPUs == 0 || r.MemoryBytes == 0 {
			return out, fmt.Errorf("qos guaranteed needs cpus and memory (requests = limits for both)")
		}
		out.Limits, out.Requests = list, list.DeepCopy()
	case "burstable":
		if len(list) == 0 {
			return out, fmt.Errorf("qos burstable needs resources.cpus or resources.memory (a pod without any is BestEffort)")
		}
		out.Limits, out.Requests = list, list.DeepCopy()
		cpu := int64(100)
		if q, ok := list[corev1.ResourceCPU]; ok && q.MilliValue() < cpu {
			cpu = q.MilliValue()
		}
		out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(cpu, resource.DecimalSI)
		if QoSClass(&corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Resources: out}}}}) != corev1.PodQOSBurstable {
			return out, fmt.Errorf("qos burstable with %g CPUs and %d bytes: requests equal limits, which is Guaranteed; give more than 0.1 CPU", r.CPUs, r.MemoryBytes)
		}
	default:
		if len(list) > 0 {
			out.Limits = list
		}
	}
	return out, nil
}

// QoSClass is the class Kubernetes gives a pod with these containers
// (pkg/apis/core/helper/qos, which ctrperf does not import): Guaranteed
// when every container requests exactly its limits of CPU and memory,
// BestEffort when none asks for anything, Burstable otherwise.
func QoSClass(pod *corev1.Pod) corev1.PodQOSClass {
	any, all := false, true
	for _, c := range pod.Spec.Containers {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			lim, hasLim := c.Resources.Limits[r]
			req, hasReq := c.Resources.Requests[r]
			if hasLim && !hasReq {
				req, hasReq = lim, true // the API server defaults requests to limits
			}
			if hasLim || hasReq {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				all = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case all:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// Service is the Service in front of a pod for networks service
// (ClusterIP) and nodeport.
func Service(ns, runID, name, podName string, ports []int, mode plan.NetworkMode) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: runLabels(runID)},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{labelPod: podName},
			Type:     corev1.ServiceTypeClusterIP,
		},
	}
	if mode == plan.NetworkNodePort {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		// The node the client dials forwards to the pod wherever it is,
		// as a load balancer's node would (the default, Cluster).
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: "p" + strconv.Itoa(p), Port: int32(p), Protocol: corev1.ProtocolTCP})
	}
	return svc
}

// LocalPV is the static local PersistentVolume of a run's service on a
// node (cluster-scoped: labelled with the run, removed by Teardown and
// `ctrperf clean`), and the claim that binds it by name.
func LocalPV(ns, runID, service, node string, size int64) (*corev1.PersistentVolume, *corev1.PersistentVolumeClaim) {
	name := dnsLabel(ns+"-"+PodName(runID, service), 63)
	q := *resource.NewQuantity(size, resource.BinarySI)
	lb := runLabels(runID)
	lb[labels.Service] = labelValue(service)
	class := "ctrperf-local"
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lb, Annotations: map[string]string{AnnotationRun: runID, "ctrperf.namespace": ns}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: q},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              class,
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{
				Path: HostPathDir(ns, runID, service)}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}}},
		},
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lb},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			VolumeName:       name,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
	}
	return pv, pvc
}

// helperPod runs one shell command on a node with the node's data root
// mounted: it makes a local PV's directory before the volume is created
// and removes a run's data directories at teardown.
func helperPod(ns, runID, name, node, image, script string) *corev1.Pod {
	t := corev1.HostPathDirectoryOrCreate
	grace := int64(gracePeriod)
	lb := runLabels(runID)
	lb[labels.Service] = "helper"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lb},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &grace,
			AutomountServiceAccountToken:  new(false),
			EnableServiceLinks:            new(false),
			Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}},
			}},
			// The root's parent, so that the root itself can go when empty.
			Volumes: []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path.Dir(HostPathRoot), Type: &t}}}},
			Containers: []corev1.Container{{
				Name: "helper", Image: image, ImagePullPolicy: corev1.PullNever,
				Command:      []string{"/bin/sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "root", MountPath: path.Dir(HostPathRoot)}},
			}},
		},
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sortStrings(out)
	return out
}
