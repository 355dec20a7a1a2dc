package kube

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ctrperf/internal/engine"
	"ctrperf/internal/image"
	"ctrperf/internal/labels"
	"ctrperf/internal/lifecycle"
)

// Teardown removes the run's data directories on their nodes (hostpath,
// local-pv), its local PersistentVolumes, and its pods, services and
// claims. The session's namespace stays for the session's other targets
// (instances, the next run) and goes in Close. Safe with a
// partial target and more than once; it runs on a fresh context when ctx
// is already cancelled (Ctrl-C).
func (k *Kube) Teardown(ctx context.Context, t *engine.Target) error {
	if t == nil {
		return nil
	}
	ctx, cancel := lifecycle.Detached(ctx, lifecycle.DefaultCleanupTimeout)
	defer cancel()
	var errs []error
	if st, ok := t.Private.(*state); ok {
		st.mu.Lock()
		nodes := make([]string, 0, len(st.dataNodes))
		for n := range st.dataNodes {
			nodes = append(nodes, n)
		}
		st.mu.Unlock()
		sort.Strings(nodes)
		for _, n := range nodes {
			// What the run wrote on the node's disk: the namespace's
			// deletion does not remove a hostPath or local PV's files.
			nsDir := HostPathRoot + "/" + k.ns
			script := "rm -rf -- '" + nsDir + "/" + dnsLabel(t.RunID, 63) + "' && { rmdir '" + nsDir + "' '" + HostPathRoot + "' 2>/dev/null || true; }"
			if err := k.runHelper(ctx, t.RunID, "rm", n, script); err != nil {
				errs = append(errs, fmt.Errorf("remove the run's data on node %s: %w", n, err))
			}
		}
	}
	if err := deletePVs(ctx, k.cs, labels.Run+"="+labelValue(t.RunID)); err != nil {
		errs = append(errs, err)
	}
	if err := k.deleteRun(ctx, t.RunID); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteRun removes the run's pods, services and claims from the session's
// namespace; the namespace itself stays for the session's other targets
// and goes in Close.
func (k *Kube) deleteRun(ctx context.Context, runID string) error {
	sctx, cancel := lifecycle.Detached(ctx, stepTimeout)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: labels.Run + "=" + labelValue(runID)}
	grace := int64(0)
	var errs []error
	if pods, err := k.cs.CoreV1().Pods(k.ns).List(sctx, sel); err == nil {
		for _, p := range pods.Items {
			if err := k.cs.CoreV1().Pods(k.ns).Delete(sctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("pod %s/%s: %s", k.ns, p.Name, describe(unreachable(err), "delete", "pods")))
			}
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "list", "pods")))
	}
	if svcs, err := k.cs.CoreV1().Services(k.ns).List(sctx, sel); err == nil {
		for _, s := range svcs.Items {
			if err := k.cs.CoreV1().Services(k.ns).Delete(sctx, s.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("service %s/%s: %s", k.ns, s.Name, describe(unreachable(err), "delete", "services")))
			}
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "list", "services")))
	}
	if pvcs, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).List(sctx, sel); err == nil {
		for _, c := range pvcs.Items {
			if err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Delete(sctx, c.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("claim %s/%s: %s", k.ns, c.Name, describe(unreachable(err), "delete", "persistentvolumeclaims")))
			}
		}
	} else if !apierrors.IsNotFound(err) {
		errs = append(errs, fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "list", "persistentvolumeclaims")))
	}
	return errors.Join(errs...)
}

// deleteOwnNamespace removes the session's namespace with everything in
// it, when this process made it, and waits until it is gone.
func (k *Kube) deleteOwnNamespace(ctx context.Context) error {
	ctx, cancel := lifecycle.Detached(ctx, lifecycle.DefaultCleanupTimeout)
	defer cancel()
	mine, err := k.ownNamespace(ctx)
	if err != nil || !mine {
		return err
	}
	return DeleteNamespace(ctx, k.cs, k.ns, k.namespaceTimeout())
}

// ownNamespace says whether the session's namespace exists and is this
// process's (its owner annotations): a deploy that found another's never
// removes it.
func (k *Kube) ownNamespace(ctx context.Context) (bool, error) {
	sctx, cancel := lifecycle.Detached(ctx, stepTimeout)
	defer cancel()
	ns, err := k.cs.CoreV1().Namespaces().Get(sctx, k.ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("namespace %s: %s", k.ns, describe(unreachable(err), "get", "namespaces"))
	}
	return k.opt.Owner.Made(ns.Annotations), nil
}

// DeleteNamespace deletes a namespace and waits until it is gone.
func DeleteNamespace(ctx context.Context, cs kubernetes.Interface, ns string, timeout time.Duration) error {
	bg := metav1.DeletePropagationBackground
	grace := int64(0)
	sctx, cancel := lifecycle.Detached(ctx, stepTimeout)
	err := cs.CoreV1().Namespaces().Delete(sctx, ns, metav1.DeleteOptions{PropagationPolicy: &bg, GracePeriodSeconds: &grace})
	cancel()
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("namespace %s: %s", ns, describe(unreachable(err), "delete", "namespaces"))
	}
	deadline := time.Now().Add(timeout)
	for {
		sctx, cancel := lifecycle.Detached(ctx, stepTimeout)
		got, err := cs.CoreV1().Namespaces().Get(sctx, ns, metav1.GetOptions{})
		cancel()
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("namespace %s: waiting for it to go: %s", ns, describe(unreachable(err), "get", "namespaces"))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("namespace %s did not go within %s (finalizers %v; %s)", ns, timeout, got.Spec.Finalizers, nsConditions(got))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("namespace %s: waiting for it to go: %w", ns, context.Cause(ctx))
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// deletePVs removes the local PersistentVolumes with the selector.
func deletePVs(ctx context.Context, cs kubernetes.Interface, selector string) error {
	sctx, cancel := lifecycle.Detached(ctx, stepTimeout)
	defer cancel()
	pvs, err := cs.CoreV1().PersistentVolumes().List(sctx, metav1.ListOptions{LabelSelector: labels.Managed + "=true," + selector})
	if err != nil {
		return fmt.Errorf("persistent volumes: %s", describe(unreachable(err), "list", "persistentvolumes"))
	}
	var errs []error
	for _, pv := range pvs.Items {
		if err := cs.CoreV1().PersistentVolumes().Delete(sctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("persistent volume %s: %s", pv.Name, describe(err, "delete", "persistentvolumes")))
		}
	}
	return errors.Join(errs...)
}

// localPV makes a service's static local PersistentVolume: its directory
// on the node (a helper pod with the node's data root), the volume pinned
// to that node, and the claim that binds it by name. The node is the
// block's, else the first Ready node.
func (k *Kube) localPV(ctx context.Context, t *engine.Target, runID, service string) (node, claim string, err error) {
	node = k.opt.Spec.Node
	if node == "" {
		for _, n := range k.info.Kube.Nodes {
			if n.Ready {
				node = n.Name
				break
			}
		}
	}
	if node == "" {
		return "", "", errors.New("local-pv: no Ready node to put the volume on")
	}
	st := t.Private.(*state)
	st.mu.Lock()
	st.dataNodes[node] = true
	st.mu.Unlock()
	dir := HostPathDir(k.ns, runID, service)
	if err := k.runHelper(ctx, runID, "mkdir", node, "mkdir -p '"+dir+"' && chmod 0777 '"+dir+"'"); err != nil {
		return "", "", fmt.Errorf("local-pv: make %s on node %s: %w", dir, node, err)
	}
	size := k.opt.LocalPVSize
	if size <= 0 {
		size = 10 << 30
	}
	pv, pvc := LocalPV(k.ns, runID, service, node, size)
	sctx, cancel := k.step(ctx)
	defer cancel()
	if _, err := k.cs.CoreV1().PersistentVolumes().Create(sctx, pv, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("local-pv: %s", describe(unreachable(err), "create", "persistentvolumes"))
	}
	if _, err := k.cs.CoreV1().PersistentVolumeClaims(k.ns).Create(sctx, pvc, metav1.CreateOptions{}); err != nil {
		return "", "", fmt.Errorf("local-pv: %s", describe(unreachable(err), "create", "persistentvolumeclaims"))
	}
	return node, pvc.Name, nil
}

// runHelper runs a shell command on a node in a helper pod and waits for
// it to succeed; the pod is deleted afterwards.
func (k *Kube) runHelper(ctx context.Context, runID, what, node, script string) error {
	img := k.opt.HelperImage
	if img == "" {
		img = image.Resolve(image.DebianBase.Name)
	}
	name := dnsLabel("helper-"+what+"-"+node+"-"+shortHash(runID+script), 63)
	pod := helperPod(k.ns, runID, name, node, img, script)
	sctx, cancel := k.step(ctx)
	_, err := k.cs.CoreV1().Pods(k.ns).Create(sctx, pod, metav1.CreateOptions{})
	cancel()
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) && k.namespaceGoing(ctx) {
		return fmt.Errorf("the session's namespace %s is gone or going; the run's data on node %s stays in %s until `ctrperf clean` (or rm)", k.ns, node, HostPathRoot)
	}
	if err != nil {
		return errors.New(describe(unreachable(err), "create", "pods"))
	}
	defer func() {
		grace := int64(0)
		dctx, cancel := k.step(ctx)
		_ = k.cs.CoreV1().Pods(k.ns).Delete(dctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
		cancel()
	}()
	deadline := time.Now().Add(k.pendingTimeout(nil))
	for {
		sctx, cancel := k.step(ctx)
		p, err := k.cs.CoreV1().Pods(k.ns).Get(sctx, name, metav1.GetOptions{})
		cancel()
		if err != nil {
			return errors.New(describe(unreachable(err), "get", "pods"))
		}
		switch p.Status.Phase {
		case corev1.PodSucceeded:
			return nil
		case corev1.PodFailed:
			return fmt.Errorf("helper pod %s failed: %s%s", name, containerStates(p), k.logTail(ctx, name, 10))
		}
		if _, err := podState(p, img); err != nil {
			var missing *ImageNotOnNodeError
			if errors.As(err, &missing) {
				return err
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("helper pod %s did not finish within %s: %s", name, k.pendingTimeout(nil), k.pendingReason(ctx, p))
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (k *Kube) namespaceGoing(ctx context.Context) bool {
	ns, err := k.cs.CoreV1().Namespaces().Get(ctx, k.ns, metav1.GetOptions{})
	return err != nil || ns.DeletionTimestamp != nil
}

// Namespace of ctrperf's found by Clean, and whose it is.
type Namespace struct {
	Name      string
	Session   string
	Host      string
	MachineID string
	BootID    string
	PID       int
	Start     uint64
	Command   string
	Going     bool // terminating already
	// OwnerErr is an owner annotation that does not parse (pid, start
	// time): such a namespace is Forged, never one of pid 0.
	OwnerErr error
}

// Whose is where a namespace's owner ran, seen from one machine.
type Whose int

const (
	// Forged: not a namespace ctrperf made (its name is not the one
	// ctrperf derives from its session, or it has no owner): never removed.
	Forged Whose = iota
	// HereLive: made on this machine in this boot; its owner's process
	// decides.
	HereLive
	// HereRebooted: made on this machine before its last boot: the owner
	// is gone.
	HereRebooted
	// Elsewhere: made on another machine, whose processes cannot be seen
	// from here; removed only with --force.
	Elsewhere
)

// forgery says why n is not a namespace ctrperf made.
func (n Namespace) forgery() string {
	switch {
	case n.OwnerErr != nil:
		return n.OwnerErr.Error()
	case n.Session == "":
		return "no session annotation " + AnnotationRun
	case n.Name != NamespaceName(n.Session):
		return fmt.Sprintf("session %q would be namespace %s", n.Session, NamespaceName(n.Session))
	}
	return fmt.Sprintf("no owner annotations %s and %s", AnnotationHost, AnnotationPID)
}

// Whose says where n's owner ran, seen from self (this machine's
// owner). Machines are told apart by machine id; a namespace without one
// (made by an older ctrperf, or on a machine with none) by hostname.
func (n Namespace) Whose(self Owner) Whose {
	if n.OwnerErr != nil || n.Session == "" || n.Name != NamespaceName(n.Session) || n.Host == "" || n.PID <= 0 {
		return Forged
	}
	same := n.Host == self.Host
	if n.MachineID != "" && self.MachineID != "" {
		same = n.MachineID == self.MachineID
	}
	switch {
	case !same:
		return Elsewhere
	case n.BootID != "" && self.BootID != "" && n.BootID != self.BootID:
		return HereRebooted
	}
	return HereLive
}

// What names it for people.
func (n Namespace) What() string {
	return fmt.Sprintf("kubernetes namespace %s (session %s, pid %d on %s)", n.Name, n.Session, n.PID, n.Host)
}

// Namespaces lists ctrperf's namespaces on the cluster (label
// ctrperf.managed=true), with their owner annotations.
func Namespaces(ctx context.Context, cs kubernetes.Interface) ([]Namespace, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: labels.Managed + "=true"})
	if err != nil {
		return nil, fmt.Errorf("list namespaces: %s", describe(unreachable(err), "list", "namespaces"))
	}
	var out []Namespace
	for _, ns := range list.Items {
		a := ns.Annotations
		n := Namespace{Name: ns.Name, Session: a[AnnotationRun], Host: a[AnnotationHost], MachineID: a[AnnotationMachineID], BootID: a[AnnotationBootID],
			Command: a[AnnotationCommand], Going: ns.DeletionTimestamp != nil}
		if n.Session == "" {
			n.Session = ns.Labels[labels.Run]
		}
		n.PID, n.Start, n.OwnerErr = parseOwnerProcess(a)
		out = append(out, n)
	}
	return out, nil
}

// parseOwnerProcess reads the owner's pid and start time from a
// namespace's annotations. A pid that is absent is 0 (no owner); one that
// is there and does not parse, or a start time that does not parse, is an
// error with its text. An absent start time (a namespace of a ctrperf that
// did not write one) is 0: no process's, so the pid alone never keeps it.
func parseOwnerProcess(a map[string]string) (pid int, start uint64, err error) {
	if v, ok := a[AnnotationPID]; ok {
		if pid, err = strconv.Atoi(v); err != nil {
			return 0, 0, fmt.Errorf("owner annotation %s=%q is not a pid", AnnotationPID, v)
		}
	}
	if v, ok := a[AnnotationStartTime]; ok {
		if start, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("owner annotation %s=%q is not a start time (clock ticks after boot)", AnnotationStartTime, v)
		}
	}
	return pid, start, nil
}

// CleanOptions decide, namespace by namespace, what Clean removes.
type CleanOptions struct {
	// Keep says whether a namespace must be left alone (its owner lives).
	Keep func(Namespace) bool
	// RunID limits the sweep to one session's namespace ("" all).
	RunID  string
	DryRun bool
	// Timeout bounds the wait for each namespace to go.
	Timeout time.Duration
	// Self is this machine's owner, to tell whose a namespace is
	// (SelfOwner when zero).
	Self Owner
	// Warn hears of the namespaces left alone as not ctrperf's (nil
	// discards).
	Warn io.Writer
}

// Clean removes ctrperf's namespaces whose owner is gone, with the local
// PersistentVolumes of their runs, and waits for each to go; dry lists
// them. Data directories that a killed run left on a node's disk
// (hostpath, local-pv) are not reachable through the API once the
// namespace is gone: they stay under HostPathRoot/<namespace> there.
func Clean(ctx context.Context, cs kubernetes.Interface, o CleanOptions) ([]string, error) {
	nss, err := Namespaces(ctx, cs)
	if err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Self.PID == 0 {
		o.Self = SelfOwner()
	}
	if o.Warn == nil {
		o.Warn = io.Discard
	}
	var removed []string
	var errs []error
	for _, n := range nss {
		if o.RunID != "" && n.Session != o.RunID && !(len(o.RunID) > len(n.Session) && o.RunID[:len(n.Session)+1] == n.Session+"-") {
			continue
		}
		if n.Whose(o.Self) == Forged {
			// A label anyone may set is no proof: ctrperf names a
			// session's namespace after it and writes its owner on it.
			fmt.Fprintf(o.Warn, "ctrperf clean: leaving namespace %s: it carries %s=true but is not one ctrperf made (%s), not even with --force\n",
				n.Name, labels.Managed, n.forgery())
			continue
		}
		if o.Keep != nil && o.Keep(n) {
			continue
		}
		removed = append(removed, n.What())
		if o.DryRun {
			continue
		}
		if err := deleteNamespacePVs(ctx, cs, n.Name); err != nil {
			errs = append(errs, err)
		}
		if err := DeleteNamespace(ctx, cs, n.Name, o.Timeout); err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// deleteNamespacePVs removes the local PVs made for a namespace's runs
// (annotation ctrperf.namespace).
func deleteNamespacePVs(ctx context.Context, cs kubernetes.Interface, ns string) error {
	pvs, err := cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: labels.Managed + "=true"})
	if err != nil {
		return fmt.Errorf("persistent volumes: %s", describe(unreachable(err), "list", "persistentvolumes"))
	}
	var errs []error
	for _, pv := range pvs.Items {
		if pv.Annotations["ctrperf.namespace"] != ns {
			continue
		}
		if err := cs.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("persistent volume %s: %s", pv.Name, describe(err, "delete", "persistentvolumes")))
		}
	}
	return errors.Join(errs...)
}
