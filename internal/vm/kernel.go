package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Kernel is the guest's kernel: an image this machine's bootloader would
// boot (Debian's linux-image-amd64 installs it) and its modules.
type Kernel struct {
	Version string `json:"version"` // "6.1.0-56-amd64"
	Image   string `json:"image"`   // /boot/vmlinuz-<version>
	Modules string `json:"modules"` // /lib/modules/<version>
}

// ErrNoKernel is wrapped when no guest kernel is installed.
var ErrNoKernel = errors.New("no guest kernel")

// FindKernel is the newest kernel of bootDir (vmlinuz-<version>) whose
// modules are in modulesDir/<version> (with modules.dep): Debian's
// linux-image-amd64 installs both. The guest never boots this machine's
// own kernel by accident: it boots what is installed, whatever runs.
func FindKernel(bootDir, modulesDir string) (Kernel, error) {
	images, _ := filepath.Glob(filepath.Join(bootDir, "vmlinuz-*"))
	var found []Kernel
	for _, img := range images {
		v := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		mod := filepath.Join(modulesDir, v)
		if _, err := os.Stat(filepath.Join(mod, "modules.dep")); err != nil {
			continue
		}
		found = append(found, Kernel{Version: v, Image: img, Modules: mod})
	}
	if len(found) == 0 {
		return Kernel{}, fmt.Errorf("%w: no %s/vmlinuz-* with its modules in %s (install Debian's linux-image-amd64)", ErrNoKernel, bootDir, modulesDir)
	}
	slices.SortFunc(found, func(a, b Kernel) int { return compareVersions(a.Version, b.Version) })
	return found[len(found)-1], nil
}

// compareVersions orders kernel versions by their numbers ("6.1.0-56"
// after "6.1.0-9"), then as text.
func compareVersions(a, b string) int {
	na, nb := versionNumbers(a), versionNumbers(b)
	if c := slices.Compare(na, nb); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

func versionNumbers(v string) []int {
	var out []int
	n, in := 0, false
	for _, r := range v {
		if r >= '0' && r <= '9' {
			n, in = n*10+int(r-'0'), true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	if in {
		out = append(out, n)
	}
	return out
}
