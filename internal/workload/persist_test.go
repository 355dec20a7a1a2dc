package workload

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"ctrperf/internal/engine"
)

// projectPage logs in as user1 and returns project 1's page, which lists
// its most recent tickets.
func projectPage(ctx context.Context, base string) (string, error) {
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(path string) (string, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("GET %s: %s", path, resp.Status)
		}
		return string(b), nil
	}
	login, err := get("/login")
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`name="authenticity_token" value="([^"]+)"`).FindStringSubmatch(login)
	if m == nil {
		return "", fmt.Errorf("no authenticity token on the login page")
	}
	form := url.Values{"username": {"user1"}, "password": {"ticketd"}, "authenticity_token": {m[1]}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/login", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		return "", fmt.Errorf("POST /login: %s", resp.Status)
	}
	return get("/projects/1")
}

// appBase is the app's address at its container IP as the engine has it
// now (a restarted container may get another address).
func appBase(ctx context.Context, t *testing.T, cli client.APIClient, id string) string {
	t.Helper()
	insp, err := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range insp.Container.NetworkSettings.Networks {
		if n.IPAddress.IsValid() {
			return fmt.Sprintf("http://%s:%d", n.IPAddress, webPort)
		}
	}
	t.Fatalf("container %s has no IP address", id)
	return ""
}

// waitPage retries projectPage until the app answers after a restart.
func waitPage(ctx context.Context, t *testing.T, cli client.APIClient, id string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		page, err := projectPage(ctx, appBase(ctx, t, cli, id))
		if err == nil {
			return page
		}
		if time.Now().After(deadline) {
			logs := ""
			if rc, lerr := cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"}); lerr == nil {
				b, _ := io.ReadAll(rc)
				rc.Close()
				logs = string(b)
			}
			res, _ := cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
			insp := res.Container
			state := ""
			if insp.State != nil {
				state = fmt.Sprintf("%s (exit %d, restarts %d)", insp.State.Status, insp.State.ExitCode, insp.RestartCount)
			}
			t.Fatalf("app did not answer after the restart: %v; container %s; logs:\n%s", err, state, logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestWebDataPersistenceDocker: tickets created by load survive a restart
// of the container when the database lives in a volume, and a new
// container whose database lives in its writable layer starts without them.
// The two at once, each with its own run ids.
func TestWebDataPersistenceDocker(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	eng := dockerEngine(t, ctx, WebImageTicketd)
	cli, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	const loadTicket = "Load ticket"
	base := Config{Runtime: engine.RuntimeDocker, Network: engine.NetworkContainerIP,
		App: map[string]any{"hash_cost": 8, "seed_tickets": 5}, Load: map[string]any{"rate": 10}}
	appID := func(t *testing.T, tgt *engine.Target) string {
		for _, c := range tgt.Containers {
			if c.Service == "app" {
				return c.ID
			}
		}
		t.Fatalf("no app container in %+v", tgt.Containers)
		return ""
	}

	concurrently(t, subtest{"volume survives a restart", func(t *testing.T) {
		c := base
		c.Data = engine.DataVolume
		tgt := deployTarget(ctx, t, eng, c, fmt.Sprintf("persist-vol-%d", os.Getpid()))
		driveWindow(ctx, t, eng, tgt, c)
		id := appID(t, tgt)
		if page := waitPage(ctx, t, cli, id); !strings.Contains(page, loadTicket) {
			t.Fatalf("the load created no ticket visible on the project page")
		}
		timeout := 10
		if _, err := cli.ContainerRestart(ctx, id, client.ContainerRestartOptions{Timeout: &timeout}); err != nil {
			t.Fatal(err)
		}
		if page := waitPage(ctx, t, cli, id); !strings.Contains(page, loadTicket) {
			t.Errorf("tickets in the volume did not survive the restart")
		}
	}}, subtest{"writable layer of a new container starts empty", func(t *testing.T) {
		c := base
		c.Data = engine.DataLayer
		runID := fmt.Sprintf("persist-layer-%d", os.Getpid())
		first := deployTarget(ctx, t, eng, c, runID)
		driveWindow(ctx, t, eng, first, c)
		if page := waitPage(ctx, t, cli, appID(t, first)); !strings.Contains(page, loadTicket) {
			t.Fatalf("the load created no ticket visible on the project page")
		}
		tctx, tcancel := context.WithTimeout(context.Background(), time.Minute)
		defer tcancel()
		if err := eng.Teardown(tctx, first); err != nil {
			t.Fatal(err)
		}
		second := deployTarget(ctx, t, eng, c, runID+"b")
		if page := waitPage(ctx, t, cli, appID(t, second)); strings.Contains(page, loadTicket) {
			t.Errorf("a new container's writable layer has the old container's tickets")
		}
	}})
}
