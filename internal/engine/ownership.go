package engine

import (
	"fmt"
	"strconv"

	"ctrperf/internal/kernel"
	"ctrperf/internal/owner"
)

// Object is something of ctrperf's that Clean found, and whose it is.
type Object struct {
	What  string `json:"what"` // "container smoke-0a0b0c-001-web", "netns ctrperf-1234abcd"
	RunID string `json:"run_id,omitempty"`
	Live  bool   `json:"live"`  // its owner is alive
	Owner string `json:"owner"` // the owner (pid, command, start), or why there is none alive
	Kept  bool   `json:"kept"`  // left alone: live and not forced
}

// Ownership decides, object by object, whether Clean may remove it: an
// object of a live owner (owner.Owners) is kept unless forced. It also
// records every decision, for `clean --dry-run` and for saying what a
// forced clean breaks. A nil *Ownership keeps nothing and records nothing
// (teardown of one's own run, and tests).
type Ownership struct {
	owners  owner.Owners
	force   bool
	kernel  kernel.FS
	found   []Object
	seen    map[string]bool
	refresh func() (owner.Owners, error)
}

// Refreshing re-reads the owners with list before calling an object
// orphaned: a bench run that started after the first reading owns objects
// the sweep may find.
func (o *Ownership) Refreshing(list func() (owner.Owners, error)) *Ownership {
	o.refresh = list
	return o
}

// describe is owners.Describe, read again on a miss.
func (o *Ownership) describe(runID func() string) (string, bool, string) {
	id := runID()
	live, who := o.owners.Describe(id)
	if !live && o.refresh != nil {
		if ow, err := o.refresh(); err == nil {
			o.owners = ow
			id = runID()
			live, who = o.owners.Describe(id)
		}
	}
	return id, live, who
}

// NewOwnership decides by owners; force removes live objects too.
func NewOwnership(owners owner.Owners, force bool) *Ownership {
	return &Ownership{owners: owners, force: force, kernel: kernel.DefaultFS(), seen: map[string]bool{}}
}

// Found is every object decided, in the order found, each once.
func (o *Ownership) Found() []Object {
	if o == nil {
		return nil
	}
	return o.found
}

func (o *Ownership) note(obj Object) bool {
	obj.Kept = obj.Live && !o.force
	if !o.seen[obj.What] {
		o.seen[obj.What] = true
		o.found = append(o.found, obj)
	}
	return obj.Kept
}

// Keep decides an object of run id runID (a session id for private
// engines): true when it must be left alone.
func (o *Ownership) Keep(what, runID string) bool {
	if o == nil {
		return false
	}
	_, live, who := o.describe(func() string { return runID })
	return o.note(Object{What: what, RunID: runID, Live: live, Owner: who})
}

// KeepDecided decides an object whose owner was judged without the
// owner records: a cluster namespace of another machine's session (live
// as far as anyone here can tell: kept unless forced), or of a boot of
// this machine that is over (gone). who says whose it is.
func (o *Ownership) KeepDecided(what, runID string, live bool, who string) bool {
	if o == nil {
		return false
	}
	return o.note(Object{What: what, RunID: runID, Live: live, Owner: who})
}

// keepExternal decides a client namespace or host veth: its name is a
// hash of a run id, found among the run ids owners recorded (else
// fallback, the run being cleaned).
func (o *Ownership) keepExternal(what, name, fallback string) bool {
	if o == nil {
		return false
	}
	id, live, who := o.describe(func() string {
		if id, ok := o.externalRunIDs()[name]; ok {
			return id
		}
		return fallback
	})
	return o.note(Object{What: what, RunID: id, Live: live, Owner: who})
}

// KeepShared decides an object every session may use (the shared default
// private engine): live while any bench session is, or any agent session
// (on a host of a plan's hosts: the bench run is on another machine, and
// its agent here deploys on the shared engines). Like Keep, it reads the
// owners again before calling the object orphaned: a run that started
// since the first reading may be sharing it.
func (o *Ownership) KeepShared(what string) bool {
	if o == nil {
		return false
	}
	s, ok := o.anySession()
	if !ok && o.refresh != nil {
		if ow, err := o.refresh(); err == nil {
			o.owners = ow
			s, ok = o.anySession()
		}
	}
	if ok {
		return o.note(Object{What: what, Live: true, Owner: "shared, in use by " + s.Record.String()})
	}
	return o.note(Object{What: what, Owner: "shared, no bench run or agent session is live"})
}

// anySession is a live owner that may use shared objects.
func (o *Ownership) anySession() (owner.Status, bool) {
	if s, ok := o.owners.AnyLive(owner.KindBench); ok {
		return s, true
	}
	return o.owners.AnyLive(owner.KindAgent)
}

// keepGenerator decides a load generator's cgroup (ctrperf/generator-PID):
// a `ctrperf load` owns nothing, so its process is its owner: live while
// the group holds processes or that pid runs.
func (o *Ownership) keepGenerator(what string, pid int, holds bool) bool {
	if o == nil {
		return false
	}
	for _, s := range o.owners {
		if s.PID == pid {
			return o.note(Object{What: what, Live: holds || s.Live, Owner: s.Record.String() + ": " + s.Reason})
		}
	}
	switch {
	case holds:
		return o.note(Object{What: what, Live: true, Owner: "pid " + strconv.Itoa(pid) + ", still in the group (a ctrperf load?)"})
	case kernel.ProcAlive(o.kernel.Proc(), pid):
		return o.note(Object{What: what, Live: true, Owner: fmt.Sprintf("pid %d is running (a ctrperf load?)", pid)})
	}
	return o.note(Object{What: what, Owner: fmt.Sprintf("pid %d is gone", pid)})
}

// externalRunIDs maps the client namespace and host veth names of every
// run id an owner recorded to that run id: those names are hashes of it.
func (o *Ownership) externalRunIDs() map[string]string {
	m := map[string]string{}
	if o == nil {
		return m
	}
	for _, s := range o.owners {
		for _, id := range s.Objects {
			ns, hostIf, _ := externalNames(id)
			m[ns], m[hostIf] = id, id
		}
	}
	return m
}
