//go:build !nokube

package runtimes

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"ctrperf/internal/bench"
	"ctrperf/internal/engine/kube"
	"ctrperf/internal/isolate"
	"ctrperf/internal/isolate/manifest"
	"ctrperf/internal/labels"
	"ctrperf/internal/plan"
)

func init() { bench.RegisterIsolator(plan.RuntimeKubernetes, kubeIsolator) }

// isolateReady bounds the wait for the DaemonSet's pods on every node.
const isolateReady = 90 * time.Second

// kubeIsolator runs the controller of a Kubernetes run as operators run
// it: the DaemonSet of `ctrperf isolate manifest`, in the session's
// namespace, managing only the run's pods (--label ctrperf.run=RUN). Its
// decisions come from the pods' logs (the decision log's copy on stdout).
// Stop deletes the DaemonSet and waits for its pods to be gone: each one
// restores what it changed on SIGTERM.
func kubeIsolator(ctx context.Context, req bench.IsolateRequest) (bench.IsolateRun, error) {
	k, ok := req.Engine.(*kube.Kube)
	if !ok {
		return nil, fmt.Errorf("engine %T is not a cluster's", req.Engine)
	}
	p := bench.IsolateParams(req.Spec)
	if p.IRQ || p.RPS {
		// The lab's nodes share one machine, whose IRQs no node owns; and
		// a DaemonSet per run cannot tell whether one node is one machine.
		p.IRQ, p.RPS = false, false
		if req.Warn != nil {
			req.Warn("isolate on kubernetes: IRQ and RPS steering are off (they are a machine's, not a node's)")
		}
	}
	o := manifest.Defaults()
	o.Namespace = k.Namespace()
	o.CRISocket = k.RuntimeSocket(o.CRISocket)
	if d := k.KubeletDir(); d != "" {
		o.KubeletDir = d
	}
	o.StateDir = "/run/ctrperf/isolate-node/" + k.Namespace() + "/$(NODE_NAME)"
	o.Args = append(p.Flags(), "--label", labels.Run+"="+kube.RunLabel(req.RunID))
	_, sa, ds, err := manifest.Objects(o)
	if err != nil {
		return nil, err
	}
	cs := k.Clientset()
	if _, err := cs.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("isolate ServiceAccount: %w", err)
	}
	if _, err := cs.AppsV1().DaemonSets(o.Namespace).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("isolate DaemonSet: %w", err)
	}
	r := &kubeIsolateRun{cs: cs, ns: o.Namespace, name: ds.Name, events: req.Events, run: kube.RunLabel(req.RunID)}
	if err := r.waitReady(ctx); err != nil {
		_ = r.Stop(context.WithoutCancel(ctx))
		return nil, err
	}
	return r, nil
}

type kubeIsolateRun struct {
	cs     kubernetes.Interface
	ns     string
	name   string
	events func(isolate.Event)
	run    string // the run's label value: its pods
	wg     sync.WaitGroup

	idMu   sync.Mutex
	pod    map[string]string // CRI container id -> pod UID (the engine's container id)
	cancel context.CancelFunc

	once sync.Once
	err  error
}

// waitReady waits for the DaemonSet's pods to be Ready on every node it
// schedules to, then follows their logs.
func (r *kubeIsolateRun) waitReady(ctx context.Context) error {
	deadline := time.Now().Add(isolateReady)
	var ds *appsv1.DaemonSet
	var err error
	for {
		ds, err = r.cs.AppsV1().DaemonSets(r.ns).Get(ctx, r.name, metav1.GetOptions{})
		if err == nil && ds.Status.DesiredNumberScheduled > 0 && ds.Status.NumberReady == ds.Status.DesiredNumberScheduled &&
			ds.Status.ObservedGeneration >= ds.Generation {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("isolate DaemonSet: its pods not Ready on every node within %s: %s", isolateReady, r.podStates(ctx))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	pods, err := r.pods(ctx)
	if err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r.cancel = cancel
	for _, p := range pods {
		r.wg.Add(1)
		go r.follow(lctx, p.Name)
	}
	return nil
}

func (r *kubeIsolateRun) pods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := r.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: manifest.AppLabel + "=" + manifest.Name})
	if err != nil {
		return nil, fmt.Errorf("isolate pods: %w", err)
	}
	return l.Items, nil
}

// podStates says why pods are not Ready (for the error).
func (r *kubeIsolateRun) podStates(ctx context.Context) string {
	pods, err := r.pods(ctx)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, p := range pods {
		s := fmt.Sprintf("%s on %s: %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		for _, c := range p.Status.ContainerStatuses {
			if w := c.State.Waiting; w != nil {
				s += fmt.Sprintf(" (%s: %s)", w.Reason, w.Message)
			}
			if t := c.LastTerminationState.Terminated; t != nil {
				s += fmt.Sprintf(" (exited %d: %s)", t.ExitCode, strings.TrimSpace(t.Message))
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "no pods"
	}
	return strings.Join(out, "; ")
}

// follow passes a controller pod's decisions (its JSON lines) to events
// until the pod ends.
func (r *kubeIsolateRun) follow(ctx context.Context, pod string) {
	defer r.wg.Done()
	st, err := r.cs.CoreV1().Pods(r.ns).GetLogs(pod, &corev1.PodLogOptions{Follow: true}).Stream(ctx)
	if err != nil {
		return
	}
	defer st.Close()
	sc := bufio.NewScanner(st)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue // the command's own lines
		}
		var e isolate.Event
		if json.Unmarshal(line, &e) == nil && r.events != nil {
			if e.Container != "" {
				e.Container = r.podOf(ctx, e.Container)
			}
			r.events(e)
		}
	}
}

// Stop deletes the DaemonSet and waits until its pods are gone (each one
// restores on SIGTERM within its grace period).
func (r *kubeIsolateRun) Stop(ctx context.Context) error {
	r.once.Do(func() {
		fg := metav1.DeletePropagationForeground
		err := r.cs.AppsV1().DaemonSets(r.ns).Delete(ctx, r.name, metav1.DeleteOptions{PropagationPolicy: &fg})
		if err != nil && !apierrors.IsNotFound(err) {
			r.err = fmt.Errorf("delete the isolate DaemonSet: %w", err)
		}
		deadline := time.Now().Add(60 * time.Second)
		for r.err == nil {
			pods, err := r.pods(ctx)
			if err == nil && len(pods) == 0 {
				if _, err := r.cs.AppsV1().DaemonSets(r.ns).Get(ctx, r.name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
					break
				}
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				r.err = errors.New("the isolate DaemonSet's pods did not end within 60 s: their restore may not have run")
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if r.cancel != nil {
			done := make(chan struct{})
			go func() { r.wg.Wait(); close(done) }()
			select { // the logs end with the pods; never wait on a stuck stream
			case <-done:
			case <-time.After(5 * time.Second):
			}
			r.cancel()
			r.wg.Wait()
		}
	})
	return r.err
}

// podOf is the UID of the run's pod that holds CRI container cid (the
// engine names a pod's container by its pod's UID); cid itself when none
// does.
func (r *kubeIsolateRun) podOf(ctx context.Context, cid string) string {
	r.idMu.Lock()
	defer r.idMu.Unlock()
	if uid, ok := r.pod[cid]; ok {
		return uid
	}
	pods, err := r.cs.CoreV1().Pods(r.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Run + "=" + r.run})
	if err != nil {
		return cid
	}
	if r.pod == nil {
		r.pod = map[string]string{}
	}
	for _, p := range pods.Items {
		for _, c := range p.Status.ContainerStatuses {
			if _, id, ok := strings.Cut(c.ContainerID, "://"); ok {
				r.pod[id] = string(p.UID)
			}
		}
	}
	if uid, ok := r.pod[cid]; ok {
		return uid
	}
	return cid
}
