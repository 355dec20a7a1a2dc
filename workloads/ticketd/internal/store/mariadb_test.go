package store

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startMariaDB runs the host's mariadbd (as root, like the web workload's
// bare-metal runs) on a data directory of its own, listening only on a
// socket, and returns a ticketd DSN for it. It skips when MariaDB is not
// installed or the test is not root, except in CI
// (CTRPERF_REQUIRE_DOCKER=1, where make test has installed it as root).
func startMariaDB(t *testing.T) string {
	t.Helper()
	required := os.Getenv("CTRPERF_REQUIRE_DOCKER") == "1"
	if os.Geteuid() != 0 {
		if required {
			t.Fatal("needs root: mariadbd runs as root here, as in the web workload's bare-metal runs")
		}
		t.Skip("needs root")
	}
	for _, tool := range []string{"mariadbd", "mariadb-install-db"} {
		if _, err := exec.LookPath(tool); err != nil {
			if required {
				t.Fatalf("%s not installed (scripts/bootstrap.sh installs mariadb-server)", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
	// A short path: the socket's must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "ctrperf-store-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data := filepath.Join(dir, "mysql")
	if out, err := exec.Command("mariadb-install-db", "--no-defaults", "--user=root", "--datadir="+data,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command("mariadbd", "--no-defaults", "--user=root", "--datadir="+data, "--socket="+sock,
		"--pid-file="+filepath.Join(dir, "m.pid"), "--skip-networking", "--innodb-buffer-pool-size=64M",
		"--innodb-flush-log-at-trx-commit=0")
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return "mysql://root@unix(" + sock + ")/ticketd"
}

// TestRecentTicketsPlanOnMariaDBRoot loads the tickets table the way a web run
// does (a few thousand tickets added to the one project the sessions use),
// recalculates InnoDB's statistics, and checks that the project page's
// query still walks the (project_id, id) index from the tickets side and
// sorts nothing. Without the hints MariaDB 10.11 scans users first and
// sorts the whole project: the web plans' stall (see recentTicketsQuery).
func TestRecentTicketsPlanOnMariaDBRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a MariaDB server")
	}
	dsn := startMariaDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := Open(ctx, dsn, "", Options{Pool: 2}, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// ticketd's default seed, then the load's tickets, all in project 1.
	if _, err := s.Seed(ctx, SeedSpec{Users: 100, Projects: 10, Tickets: 20, Salt: []byte("s"), Hash: []byte("h"), Iterations: 1}); err != nil {
		t.Fatal(err)
	}
	for lo := 0; lo < 6000; lo += 500 {
		var q strings.Builder
		q.WriteString("INSERT INTO tickets (project_id, author_id, subject, description, status, priority, seeded, created_at) VALUES ")
		for i := lo; i < lo+500; i++ {
			if i > lo {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "(1, %d, 'subject %d', 'a description', 'new', 'normal', 0, NOW(6))", 1+i%100, i)
		}
		if _, err := s.db.ExecContext(ctx, q.String()); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.db.ExecContext(ctx, "ANALYZE TABLE tickets, users"); err != nil {
		t.Fatal(err)
	}
	plan := func(query string) string {
		rows, err := s.db.QueryContext(ctx, "EXPLAIN "+query, 1, 25)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var f []string
			for i, c := range cols {
				if b, ok := vals[i].([]byte); ok {
					f = append(f, c+"="+string(b))
				}
			}
			lines = append(lines, strings.Join(f, " "))
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return strings.Join(lines, "\n")
	}
	t.Logf("plan without the hints:\n%s", plan(recentTicketsQuery(DialectSQLite)))
	got := plan(recentTicketsQuery(DialectMySQL))
	first, _, _ := strings.Cut(got, "\n")
	if !strings.Contains(first, "table=t ") || !strings.Contains(first, "key=tickets_project_recent") || strings.Contains(got, "filesort") {
		t.Errorf("the project page's plan does not walk tickets_project_recent from the tickets side without sorting:\n%s", got)
	}
	ts, err := s.RecentTickets(ctx, 1, 25)
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 25 || ts[0].ID < ts[24].ID || ts[0].AuthorLogin == "" {
		t.Errorf("recent tickets: %d, first %+v, last %+v; want 25 newest first with their authors", len(ts), ts[0], ts[len(ts)-1])
	}
}
