package vm

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// A guest on the user-mode network (NetworkUser) is reached through
// ports of 127.0.0.1 that QEMU forwards to it (hostfwd), added when a
// run's services are deployed and removed at its teardown, through QEMU's
// control socket (QMP).

// forward is one port forward: 127.0.0.1:Host to the guest's Guest.
type forward struct {
	Host, Guest int
}

func (f forward) rule(guest netip.Addr) string {
	return fmt.Sprintf("tcp:127.0.0.1:%d-%s:%d", f.Host, guest, f.Guest)
}

// Forward has QEMU forward a free port of 127.0.0.1 to the guest's port
// for run; it returns the port.
func (g *Guest) Forward(ctx context.Context, run string, guestPort int) (int, error) {
	host, err := freePort()
	if err != nil {
		return 0, err
	}
	f := forward{Host: host, Guest: guestPort}
	// hostfwd_add says nothing when it worked.
	if out, err := hmp(ctx, g.qmp(), "hostfwd_add net0 "+f.rule(g.GuestIP.Addr())); err != nil || out != "" {
		return 0, fmt.Errorf("guest %s: forward 127.0.0.1:%d to port %d: %w", g.Name, host, guestPort, errors.Join(err, errorText(out)))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.forwards == nil {
		g.forwards = map[string][]forward{}
	}
	g.forwards[run] = append(g.forwards[run], f)
	return host, nil
}

// Unforward removes run's port forwards.
func (g *Guest) Unforward(ctx context.Context, run string) error {
	g.mu.Lock()
	fs := g.forwards[run]
	delete(g.forwards, run)
	g.mu.Unlock()
	var errs []error
	for _, f := range fs {
		out, err := hmp(ctx, g.qmp(), fmt.Sprintf("hostfwd_remove net0 tcp:127.0.0.1:%d", f.Host))
		if err == nil && !removed(out) {
			err = errorText(out)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("guest %s: remove the forward of 127.0.0.1:%d: %w", g.Name, f.Host, err))
		}
	}
	return errors.Join(errs...)
}

// freePort is a port of 127.0.0.1 that nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// removed says whether hostfwd_remove's output says it removed the rule
// ("host forwarding rule for tcp:127.0.0.1:N removed"; a failure says
// "could not remove ...").
func removed(out string) bool {
	return strings.HasSuffix(strings.TrimSpace(out), " removed") && !strings.Contains(out, "could not")
}

// errorText is an HMP command's output as an error, nil for none.
func errorText(out string) error {
	if out = strings.TrimSpace(out); out != "" {
		return errors.New(out)
	}
	return nil
}

// hmp runs a human monitor command through QMP at socket and returns
// what it printed: HMP says why a command failed in its output.
func hmp(ctx context.Context, socket, command string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return "", fmt.Errorf("QMP: %w", err)
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = c.SetDeadline(deadline)
	out, err := qmpSession(c, command)
	if err != nil {
		return "", fmt.Errorf("QMP: %w", err)
	}
	return out, nil
}

// qmpSession reads QEMU's greeting, negotiates, runs command as HMP and
// returns its output.
func qmpSession(c net.Conn, command string) (string, error) {
	r := bufio.NewReader(c)
	var greeting struct {
		QMP json.RawMessage `json:"QMP"`
	}
	if err := readQMP(r, &greeting); err != nil || greeting.QMP == nil {
		return "", fmt.Errorf("no greeting (%v)", err)
	}
	if _, err := execQMP(c, r, map[string]any{"execute": "qmp_capabilities"}); err != nil {
		return "", err
	}
	ret, err := execQMP(c, r, map[string]any{"execute": "human-monitor-command", "arguments": map[string]string{"command-line": command}})
	if err != nil {
		return "", err
	}
	var out string
	if err := json.Unmarshal(ret, &out); err != nil {
		return "", fmt.Errorf("%s: %w", ret, err)
	}
	return out, nil
}

// execQMP sends cmd and returns its return value, past any event.
func execQMP(c net.Conn, r *bufio.Reader, cmd map[string]any) (json.RawMessage, error) {
	b, _ := json.Marshal(cmd)
	if _, err := c.Write(append(b, '\n')); err != nil {
		return nil, err
	}
	for {
		var resp struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class, Desc string
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := readQMP(r, &resp); err != nil {
			return nil, err
		}
		switch {
		case resp.Error != nil:
			return nil, fmt.Errorf("%s: %s", resp.Error.Class, resp.Error.Desc)
		case resp.Event != "":
			continue
		default:
			return resp.Return, nil
		}
	}
}

func readQMP(r *bufio.Reader, v any) error {
	line, err := r.ReadBytes('\n')
	if err != nil {
		return err
	}
	return json.Unmarshal(line, v)
}
