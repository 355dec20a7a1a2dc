package doctor

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/prometheus/procfs"

	"ctrperf/internal/kernel"
)

func collectKernel(_ context.Context, o options, f *Facts) error {
	b, err := os.ReadFile(o.kernel.Proc("sys", "kernel", "osrelease"))
	if err != nil {
		return fmt.Errorf("read kernel release: %w", err)
	}
	f.Kernel = strings.TrimSpace(string(b))
	return nil
}

// collectCgroups decides the version from what is mounted where: cgroup2 at
// the cgroup root is v2; v1 controllers with a cgroup2 mount beside them
// (often empty, as on this project's machines) is hybrid; else v1.
func collectCgroups(_ context.Context, o options, f *Facts) error {
	fs, err := procfs.NewFS(o.kernel.Proc())
	if err != nil {
		return fmt.Errorf("open %s: %w", o.kernel.Proc(), err)
	}
	self, err := fs.Self()
	if err != nil {
		return fmt.Errorf("find own process in %s: %w", o.kernel.Proc(), err)
	}
	mounts, err := self.MountInfo()
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	v1 := false
	for _, m := range mounts {
		switch m.FSType {
		case "cgroup2":
			f.Cgroups.V2Mount = m.MountPoint
		case "cgroup":
			v1 = true
		}
	}
	switch {
	case f.Cgroups.V2Mount == kernel.CgroupMount && !v1:
		f.Cgroups.Version = "v2"
	case v1 && f.Cgroups.V2Mount != "":
		f.Cgroups.Version = "hybrid"
	case v1:
		f.Cgroups.Version = "v1"
	default:
		return fmt.Errorf("no cgroup filesystem mounted")
	}
	if f.Cgroups.V2Mount != "" {
		// The mount point is an absolute host path; read it below the sys root.
		rel := strings.TrimPrefix(f.Cgroups.V2Mount, kernel.SysMount)
		if b, err := os.ReadFile(o.kernel.Sys(rel, "cgroup.controllers")); err == nil && len(strings.Fields(string(b))) > 0 {
			f.Cgroups.V2Controllers = strings.Fields(string(b))
		}
	}
	if f.Cgroups.Version == "v2" {
		f.Cgroups.Controllers = f.Cgroups.V2Controllers
		return nil
	}
	cg, err := os.Open(o.kernel.Proc("cgroups"))
	if err != nil {
		return fmt.Errorf("read v1 controllers: %w", err)
	}
	defer cg.Close()
	f.Cgroups.Controllers, err = parseV1Controllers(cg)
	if err != nil {
		return fmt.Errorf("parse %s: %w", o.kernel.Proc("cgroups"), err)
	}
	return nil
}

// parseV1Controllers reads /proc/cgroups: the enabled controllers that are
// attached to a v1 hierarchy (hierarchy id 0 means not mounted as v1).
func parseV1Controllers(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		fl := strings.Fields(line)
		if len(fl) != 4 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		if fl[1] != "0" && fl[3] == "1" {
			out = append(out, fl[0])
		}
	}
	sort.Strings(out)
	return out, sc.Err()
}
