package vm

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindKernel(t *testing.T) {
	cases := []struct {
		desc    string
		images  []string // versions with a vmlinuz
		modules []string // versions with modules.dep
		want    string
	}{
		{"none installed", nil, nil, ""},
		{"an image without modules is no guest kernel", []string{"6.1.0-56-amd64"}, nil, ""},
		{"the one with modules", []string{"6.1.0-56-amd64", "6.18.0-1-cloud"}, []string{"6.1.0-56-amd64"}, "6.1.0-56-amd64"},
		{"the newest by number, not by text", []string{"6.1.0-9-amd64", "6.1.0-56-amd64"}, []string{"6.1.0-9-amd64", "6.1.0-56-amd64"}, "6.1.0-56-amd64"},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			boot, mods := t.TempDir(), t.TempDir()
			for _, v := range c.images {
				if err := os.WriteFile(filepath.Join(boot, "vmlinuz-"+v), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			for _, v := range c.modules {
				if err := os.MkdirAll(filepath.Join(mods, v), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(mods, v, "modules.dep"), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			k, err := FindKernel(boot, mods)
			if c.want == "" {
				if !errors.Is(err, ErrNoKernel) {
					t.Errorf("FindKernel = %+v, %v; want ErrNoKernel", k, err)
				}
				return
			}
			if err != nil || k.Version != c.want || k.Image != filepath.Join(boot, "vmlinuz-"+c.want) || k.Modules != filepath.Join(mods, c.want) {
				t.Errorf("FindKernel = %+v, %v; want %s", k, err, c.want)
			}
		})
	}
}

func TestCachedProbe(t *testing.T) {
	file := filepath.Join(t.TempDir(), "probe.json")
	probed := 0
	probe := func() BootProbe { probed++; return BootProbe{Accel: AccelKVM, Reason: "stuck"} }
	steps := []struct {
		desc       string
		key        string
		wantProbed int
		wantCached bool
	}{
		{"first time: probed", "a", 1, false},
		{"same key: cached", "a", 1, true},
		{"another QEMU, kernel or boot: probed again", "b", 2, false},
	}
	for _, s := range steps {
		p := CachedProbe(file, s.key, probe)
		if probed != s.wantProbed || p.Cached != s.wantCached || p.Reason != "stuck" {
			t.Errorf("%s: probed %d times, %+v", s.desc, probed, p)
		}
	}
}
