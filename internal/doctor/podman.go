package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// collectPodman says whether runtime podman can run here: ctrperf starts
// a service of Debian's podman (rootful, so as root) with netavark for
// its networks and published ports, and aardvark-dns for names on a
// run's network. Nothing is started to find out.
func collectPodman(_ context.Context, o options, f *Facts) error {
	f.Podman = Capability{Name: "podman"}
	var missing []string
	p, err := o.lookPath("podman")
	if err != nil {
		missing = append(missing, "podman")
	}
	for _, pkg := range []string{"netavark", "aardvark-dns"} {
		if _, err := os.Stat(filepath.Join(o.usrRoot, "lib/podman", pkg)); errors.Is(err, os.ErrNotExist) {
			missing = append(missing, pkg)
		}
	}
	switch {
	case len(missing) > 0:
		f.Podman.Reason = fmt.Sprintf("Debian packages %s not installed (scripts/bootstrap.sh installs them)", strings.Join(missing, ", "))
	case o.geteuid() != 0:
		f.Podman.Reason = fmt.Sprintf("%s found, but runtime podman is rootful Podman: run ctrperf as root", p)
	default:
		f.Podman.Usable = true
		f.Podman.Reason = p + " with netavark (a podman system service of ctrperf's own per session)"
	}
	return nil
}
