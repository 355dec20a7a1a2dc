package store

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestLocation(t *testing.T) {
	tests := []struct {
		desc, db                       string
		wantDriver, wantDSN, wantPrint string
		wantErr                        string
	}{
		{desc: "default is SQLite under the data dir", db: "", wantDriver: DialectSQLite, wantDSN: "file:/d/ticketd.db?", wantPrint: "sqlite:/d/ticketd.db"},
		{desc: "absolute SQLite path", db: "sqlite:/x/y.db", wantDriver: DialectSQLite, wantPrint: "sqlite:/x/y.db"},
		{desc: "MariaDB over TCP, default port, password hidden", db: "mysql://app:secret@db/ticketd", wantDriver: DialectMySQL, wantDSN: "app:secret@tcp(db:3306)/ticketd", wantPrint: "mysql://app@tcp(db:3306)/ticketd"},
		{desc: "MariaDB over a unix socket", db: "mysql://app:pw@unix(/run/m.sock)/t", wantDriver: DialectMySQL, wantDSN: "app:pw@unix(/run/m.sock)/t", wantPrint: "mysql://app@unix(/run/m.sock)/t"},
		{desc: "missing database name", db: "mysql://app:pw@db:3306", wantErr: "missing /database"},
		{desc: "missing user", db: "mysql://db:3306/x", wantErr: "missing user@"},
		{desc: "unknown scheme", db: "pg://x", wantErr: "want sqlite:PATH"},
		{desc: "empty SQLite path", db: "sqlite:", wantErr: "empty SQLite path"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			drv, dsn, pr, err := Location(tc.db, "/d", Options{})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if drv != tc.wantDriver || !strings.HasPrefix(dsn, tc.wantDSN) || pr != tc.wantPrint {
				t.Errorf("got %q %q %q, want %q %q… %q", drv, dsn, pr, tc.wantDriver, tc.wantDSN, tc.wantPrint)
			}
			if strings.Contains(pr, "secret") {
				t.Errorf("printable location %q leaks the password", pr)
			}
		})
	}
}

func TestSeedIsIdempotentAndTopsUp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *Store {
		s, err := Open(ctx, "", dir, Options{Pool: 2}, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	spec := SeedSpec{Users: 4, Projects: 2, Tickets: 3, Salt: []byte("s"), Hash: []byte("h"), Iterations: 1}
	steps := []struct {
		desc string
		spec SeedSpec
		want SeedResult
	}{
		{"fresh database", spec, SeedResult{4, 2, 6}},
		{"same spec again adds nothing", spec, SeedResult{}},
		{"larger spec tops up", SeedSpec{Users: 5, Projects: 3, Tickets: 4, Salt: []byte("s"), Hash: []byte("h"), Iterations: 1}, SeedResult{1, 1, 2 + 4}},
	}
	for _, st := range steps {
		s := open()
		got, err := s.Seed(ctx, st.spec)
		if err != nil {
			t.Fatalf("%s: %v", st.desc, err)
		}
		if got != st.want {
			t.Errorf("%s: added %+v, want %+v", st.desc, got, st.want)
		}
		s.Close()
	}
	// A ticket created by load does not count towards the seed.
	s := open()
	defer s.Close()
	if _, err := s.CreateTicket(ctx, NewTicket{ProjectID: 1, AuthorID: 1, Subject: "x"}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Seed(ctx, SeedSpec{Users: 5, Projects: 3, Tickets: 4, Salt: []byte("s"), Hash: []byte("h"), Iterations: 1})
	if err != nil || got != (SeedResult{}) {
		t.Errorf("reseed after load: %+v %v, want nothing added", got, err)
	}
	p, err := s.Project(ctx, 1)
	if err != nil || p.TicketCount != 5 {
		t.Errorf("project 1 ticket count %d (%v), want 5", p.TicketCount, err)
	}
	ts, err := s.RecentTickets(ctx, 1, 2)
	if err != nil || len(ts) != 2 || ts[0].Subject != "x" {
		t.Errorf("recent tickets %+v (%v), want the new one first", ts, err)
	}
}
