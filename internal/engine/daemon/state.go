package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"ctrperf/internal/engine"
	"ctrperf/internal/fsutil"
)

// State is everything a private engine owns, written before each piece is
// created so that a later CleanAll finds it even after SIGKILL.
type State struct {
	Name     string            `json:"name"`
	RunID    string            `json:"run_id,omitempty"` // "" for the shared default engine
	Spec     engine.EngineSpec `json:"spec"`
	PID      int               `json:"pid,omitempty"`
	Socket   string            `json:"socket"`
	ExecRoot string            `json:"exec_root"`
	DataRoot string            `json:"data_root"`
	// KeepDataRoot: the default engine's data root survives so its image
	// cache does; every other data root is removed with the engine.
	KeepDataRoot bool   `json:"keep_data_root,omitempty"`
	PIDFile      string `json:"pidfile"`
	LogFile      string `json:"log_file"`
	ConfigFile   string `json:"config_file"`
	Bridge       string `json:"bridge"`
	Subnet       string `json:"subnet,omitempty"` // CIDR of the bridge, e.g. 10.213.0.1/24
	IPTables     bool   `json:"iptables"`
	// AddedJumps are the rules this engine's dockerd added to the built-in
	// chains (nat OUTPUT's jump to DOCKER without the loopback exclusion,
	// which --userland-proxy=false makes): dockerd leaves them behind when
	// it stops, and they would then DNAT 127.0.0.1 traffic of every other
	// engine's published ports away from its docker-proxy.
	AddedJumps []ipRule   `json:"added_jumps,omitempty"`
	Loop       *LoopState `json:"loop,omitempty"`
	Started    time.Time  `json:"started"`
}

// LoopState is a data root on a loop-mounted image file.
type LoopState struct {
	FS     string `json:"fs"`               // ext4, xfs, btrfs
	Image  string `json:"image"`            // the sparse image file
	Device string `json:"device,omitempty"` // /dev/loopN once attached
	Mount  string `json:"mount"`            // where it is mounted
}

const stateFile = "state.json"

func stateDir(o Options, name string) string { return filepath.Join(o.enginesDir(), name) }

// writeState replaces the state file atomically, so a reader never sees half.
func writeState(o Options, st *State) error {
	dir := stateDir(o, st.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create engine state dir %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("encode state of engine %s: %w", st.Name, err)
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(dir, stateFile), append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write state of engine %s: %w", st.Name, err)
	}
	return nil
}

func parseState(r io.Reader) (*State, error) {
	var st State
	dec := json.NewDecoder(r)
	if err := dec.Decode(&st); err != nil {
		return nil, err
	}
	if st.Name == "" {
		return nil, errors.New("state has no engine name")
	}
	return &st, nil
}

func readState(o Options, name string) (*State, error) {
	p := filepath.Join(stateDir(o, name), stateFile)
	f, err := os.Open(p)
	if err != nil {
		return nil, fmt.Errorf("read engine state: %w", err)
	}
	defer f.Close()
	st, err := parseState(f)
	if err != nil {
		return nil, fmt.Errorf("parse engine state %s: %w", p, err)
	}
	return st, nil
}

// listStates reads every engine state; unreadable ones are reported by name
// with an error rather than hidden, so clean can say what it could not do.
func listStates(o Options) ([]*State, []error) {
	ents, err := os.ReadDir(o.enginesDir())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("list engines in %s: %w", o.enginesDir(), err)}
	}
	var out []*State
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		st, err := readState(o, e.Name())
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				// A state dir without state: a start that died before its
				// first write. Nothing else can exist yet; clean the dir.
				out = append(out, &State{Name: e.Name()})
				continue
			}
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, errs
}
