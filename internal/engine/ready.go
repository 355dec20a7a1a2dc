package engine

import (
	"context"
	"net"
)

// WaitReady polls a service's ready check on addr (through dial) until it
// passes, alive reports the service dead, or the check's timeout or ctx
// ends: the readiness every engine shares (engines in other packages, such
// as runtime kubernetes', call it after their own "is it running").
func WaitReady(ctx context.Context, rc ReadyCheck, addr string, dial func(context.Context, string, string) (net.Conn, error), alive func(context.Context) error) error {
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	return waitReady(ctx, rc, addr, dial, alive)
}

// DeploymentInfo is an engine whose record depends on the deployment, not
// the engine alone (runtime kubernetes: the pods' QoS class and nodes):
// the runner records DeploymentInfo(t) instead of Info when it is not nil.
type DeploymentInfo interface {
	DeploymentInfo(t *Target) *Info
}
