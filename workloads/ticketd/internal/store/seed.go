package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// SeedSpec is the size of the data ticketd creates at start-up.
type SeedSpec struct {
	Users    int // user1 … userN
	Projects int // project-1 … project-N
	Tickets  int // seeded tickets per project
	// Every seeded user shares one password so that seeding N users costs
	// one hash, not N (a login still pays the full hash cost to verify).
	Salt       []byte
	Hash       []byte
	Iterations int
}

// SeedResult says what seeding did.
type SeedResult struct {
	UsersAdded, ProjectsAdded, TicketsAdded int
}

// UserLogin is the login name of seeded user i (1-based).
func UserLogin(i int) string { return fmt.Sprintf("user%d", i) }

// Seed creates the users, projects and tickets the spec asks for that do
// not exist yet, so running it again on the same data adds nothing and a
// larger spec tops the data up. Users and projects have fixed ids; seeded
// tickets are counted per project through their seeded flag, so tickets
// created by load never count towards the seed.
func (s *Store) Seed(ctx context.Context, spec SeedSpec) (SeedResult, error) {
	var r SeedResult
	ignore := "INSERT OR IGNORE"
	if s.dialect == DialectMySQL {
		ignore = "INSERT IGNORE"
	}
	now := time.Now().UTC()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for lo := 1; lo <= spec.Users; lo += 200 {
			hi := min(lo+199, spec.Users)
			var q strings.Builder
			args := make([]any, 0, (hi-lo+1)*6)
			q.WriteString(ignore + " INTO users (id, login, name, salt, hash, iterations) VALUES ")
			for i := lo; i <= hi; i++ {
				if i > lo {
					q.WriteString(",")
				}
				q.WriteString("(?,?,?,?,?,?)")
				args = append(args, i, UserLogin(i), fmt.Sprintf("User %d", i), spec.Salt, spec.Hash, spec.Iterations)
			}
			res, err := tx.ExecContext(ctx, q.String(), args...)
			if err != nil {
				return fmt.Errorf("seed users %d-%d: %w", lo, hi, err)
			}
			n, _ := res.RowsAffected()
			r.UsersAdded += int(n)
		}
		for i := 1; i <= spec.Projects; i++ {
			res, err := tx.ExecContext(ctx, ignore+` INTO projects (id, identifier, name, description, ticket_count, updated_at) VALUES (?,?,?,?,0,?)`,
				i, fmt.Sprintf("project-%d", i), fmt.Sprintf("Project %d", i), projectDescription(i), now)
			if err != nil {
				return fmt.Errorf("seed project %d: %w", i, err)
			}
			n, _ := res.RowsAffected()
			r.ProjectsAdded += int(n)
		}
		for p := 1; p <= spec.Projects; p++ {
			var have int
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM tickets WHERE project_id = ? AND seeded = 1`, p).Scan(&have); err != nil {
				return fmt.Errorf("count seeded tickets of project %d: %w", p, err)
			}
			for lo := have + 1; lo <= spec.Tickets; lo += 200 {
				hi := min(lo+199, spec.Tickets)
				var q strings.Builder
				args := make([]any, 0, (hi-lo+1)*6)
				q.WriteString(`INSERT INTO tickets (project_id, author_id, subject, description, status, priority, seeded, created_at) VALUES `)
				for i := lo; i <= hi; i++ {
					if i > lo {
						q.WriteString(",")
					}
					q.WriteString("(?,?,?,?,?,?,1,?)")
					author := 1
					if spec.Users > 0 {
						author = 1 + (p*31+i)%spec.Users
					}
					args = append(args, p, author, fmt.Sprintf("Seeded ticket %d of project %d", i, p),
						ticketDescription(p, i), statuses[(p+i)%len(statuses)], priorities[i%len(priorities)], now)
				}
				if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
					return fmt.Errorf("seed tickets %d-%d of project %d: %w", lo, hi, p, err)
				}
				if _, err := tx.ExecContext(ctx, `UPDATE projects SET ticket_count = ticket_count + ? WHERE id = ?`, hi-lo+1, p); err != nil {
					return fmt.Errorf("seed ticket count of project %d: %w", p, err)
				}
				r.TicketsAdded += hi - lo + 1
			}
		}
		return nil
	})
	if err != nil {
		return r, fmt.Errorf("seeding %s: %w", s.where, err)
	}
	return r, nil
}

func (s *Store) inTx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := f(tx); err != nil {
		tx.Rollback() //nolint:errcheck // the original error matters
		return err
	}
	return tx.Commit()
}

var (
	statuses   = []string{"new", "in progress", "resolved", "feedback", "closed"}
	priorities = []string{"low", "normal", "normal", "high", "urgent"}
)

func projectDescription(i int) string {
	return fmt.Sprintf("Project %d tracks the work of team %d: releases, bugs and feature requests. "+
		"It is seeded by ticketd so that the project page reads a realistic amount of data.", i, i%7+1)
}

func ticketDescription(p, i int) string {
	return fmt.Sprintf("Steps to reproduce: open page %d of project %d, submit the form twice, observe the error. "+
		"Expected: one record. Actual: two records and a warning in the log. Seen on build %d.", i%13+1, p, 1000+i)
}
