package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRecipeHashes(t *testing.T) {
	base := Base{Name: "b", Repo: "r", Suite: "bookworm", Variant: "minbase", Packages: []string{"fio", "memcached"}}
	df := dockerfile{From: Scratch, CopyRootfs: true, Entrypoint: []string{"/x"}}
	files := map[string]File{"/x": {Mode: 0o755, Data: []byte("binary")}}
	with := func(f func(*Base)) Base {
		b := base
		b.Packages = append([]string(nil), base.Packages...)
		f(&b)
		return b
	}
	tests := []struct {
		desc string
		a, b string
		same bool
	}{
		{"base: same recipe, same hash", baseHash(base, "http://m", "amd64"), baseHash(base, "http://m", "amd64"), true},
		{"base: package order does not matter", baseHash(base, "http://m", "amd64"), baseHash(with(func(b *Base) { b.Packages = []string{"memcached", "fio"} }), "http://m", "amd64"), true},
		{"base: name and repo are not the recipe", baseHash(base, "http://m", "amd64"), baseHash(with(func(b *Base) { b.Name, b.Repo = "other", "other/repo" }), "http://m", "amd64"), true},
		{"base: another package", baseHash(base, "http://m", "amd64"), baseHash(with(func(b *Base) { b.Packages = append(b.Packages, "sysbench") }), "http://m", "amd64"), false},
		{"base: another suite", baseHash(base, "http://m", "amd64"), baseHash(with(func(b *Base) { b.Suite = "trixie" }), "http://m", "amd64"), false},
		{"base: another variant", baseHash(base, "http://m", "amd64"), baseHash(with(func(b *Base) { b.Variant = "buildd" }), "http://m", "amd64"), false},
		{"base: another mirror", baseHash(base, "http://m", "amd64"), baseHash(base, "http://n", "amd64"), false},
		{"base: another architecture", baseHash(base, "http://m", "amd64"), baseHash(base, "http://m", "arm64"), false},
		{"derived: same inputs, same hash", derivedHash("sha256:1", df, files), derivedHash("sha256:1", df, files), true},
		{"derived: parent rebuilt", derivedHash("sha256:1", df, files), derivedHash("sha256:2", df, files), false},
		{"derived: file content", derivedHash("sha256:1", df, files), derivedHash("sha256:1", df, map[string]File{"/x": {Mode: 0o755, Data: []byte("binarY")}}), false},
		{"derived: file mode", derivedHash("sha256:1", df, files), derivedHash("sha256:1", df, map[string]File{"/x": {Mode: 0o700, Data: []byte("binary")}}), false},
		{"derived: file path", derivedHash("sha256:1", df, files), derivedHash("sha256:1", df, map[string]File{"/y": {Mode: 0o755, Data: []byte("binary")}}), false},
		{"derived: entrypoint", derivedHash("sha256:1", df, files), derivedHash("sha256:1", dockerfile{From: Scratch, CopyRootfs: true, Entrypoint: []string{"/y"}}, files), false},
		{"derived: same bytes split differently over files", derivedHash("sha256:1", df, map[string]File{"/a": {Data: []byte("ab")}, "/b": {Data: []byte("c")}}), derivedHash("sha256:1", df, map[string]File{"/a": {Data: []byte("a")}, "/b": {Data: []byte("bc")}}), false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if (tc.a == tc.b) != tc.same {
				t.Errorf("hashes %s and %s: same=%v, want %v", tc.a, tc.b, tc.a == tc.b, tc.same)
			}
			if len(tc.a) != 16 {
				t.Errorf("hash %q: want 16 hex digits", tc.a)
			}
		})
	}
}

func TestGeneratedInstructions(t *testing.T) {
	tests := []struct {
		desc string
		df   dockerfile
		want string
	}{
		{"scratch with a binary", dockerfile{From: Scratch, CopyRootfs: true, Entrypoint: []string{"/ticketd"}, Cmd: []string{"-listen", ":8080"}},
			"FROM scratch\nCOPY rootfs/ /\nENTRYPOINT [\"/ticketd\"]\nCMD [\"-listen\",\":8080\"]\n"},
		{"derived keeps parent's process when none given", dockerfile{From: "ctrperf/debian-base:latest", CopyRootfs: true},
			"FROM ctrperf/debian-base:latest\nCOPY rootfs/ /\n"},
		{"env sorted and quoted, workdir, user", dockerfile{From: "p", Env: map[string]string{"Z": "last", "A": `say "hi" \ there`}, Workdir: "/srv", User: "mysql"},
			"FROM p\nENV A=\"say \\\"hi\\\" \\\\ there\"\nENV Z=\"last\"\nWORKDIR /srv\nUSER mysql\n"},
		{"empty cmd overrides the parent's", dockerfile{From: "p", Cmd: []string{}}, "FROM p\nCMD []\n"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := tc.df.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestBuildContext(t *testing.T) {
	df := dockerfile{From: Scratch, CopyRootfs: true, Entrypoint: []string{"/bin/app"}}
	files := map[string]File{
		"/bin/app":          {Mode: 0o755, Data: []byte("ELF")},
		"/etc/app/conf.ini": {Data: []byte("k=v\n")},
	}
	ctx1, err := buildContext(df, files)
	if err != nil {
		t.Fatal(err)
	}
	ctx2, _ := buildContext(df, files)
	if !bytes.Equal(ctx1, ctx2) {
		t.Error("the same inputs gave different context bytes")
	}
	type entry struct {
		mode int64
		dir  bool
		data string
	}
	got := map[string]entry{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(ctx1))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = entry{h.Mode, h.Typeflag == tar.TypeDir, string(b)}
		order = append(order, h.Name)
	}
	want := map[string]entry{
		"Dockerfile":              {0o644, false, df.String()},
		"rootfs/":                 {0o755, true, ""},
		"rootfs/bin/":             {0o755, true, ""},
		"rootfs/bin/app":          {0o755, false, "ELF"},
		"rootfs/etc/":             {0o755, true, ""},
		"rootfs/etc/app/":         {0o755, true, ""},
		"rootfs/etc/app/conf.ini": {0o644, false, "k=v\n"},
	}
	if len(got) != len(want) {
		t.Errorf("entries %v, want %d entries", order, len(want))
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", name, g, ok, w)
		}
	}
	for i, name := range order {
		if strings.HasSuffix(name, "/app/conf.ini") {
			if i < 1 || order[i-1] != "rootfs/etc/app/" {
				t.Errorf("file %s written before its directory: %v", name, order)
			}
		}
	}

	bad := []struct{ desc, path string }{
		{"relative path", "etc/x"},
		{"unclean path", "/etc/../x"},
		{"root itself", "/"},
	}
	for _, tc := range bad {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := buildContext(df, map[string]File{tc.path: {}}); err == nil {
				t.Errorf("path %q accepted", tc.path)
			}
		})
	}
}

func TestValidateEnv(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		ok   bool
	}{
		{"plain", map[string]string{"MYSQL_PWD": "x y"}, true},
		{"name with space", map[string]string{"A B": "x"}, false},
		{"name with =", map[string]string{"A=B": "x"}, false},
		{"multi-line value", map[string]string{"A": "x\ny"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if err := validateEnv(tc.env); (err == nil) != tc.ok {
				t.Errorf("validateEnv(%v) = %v, want ok=%v", tc.env, err, tc.ok)
			}
		})
	}
}

func TestAptSourcesMirror(t *testing.T) {
	tests := []struct {
		desc, root, suite, want string
		wantErr                 bool
	}{
		{"deb822 debian.sources, skipping Enabled: no and *.disabled files", "testdata/apt-deb822", "bookworm", "http://deb.debian.org/debian", false},
		{"deb822: security suite is its own entry", "testdata/apt-deb822", "bookworm-security", "http://deb.debian.org/debian-security", false},
		{"one-line with [options], deb-src and comments", "testdata/apt-oneline", "bookworm", "http://ftp.jp.debian.org/debian", false},
		{"no source for the suite", "testdata/apt-none", "bookworm", "", true},
		{"no apt directory at all", "testdata/does-not-exist", "bookworm", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := Base{Suite: tc.suite}.mirror(tc.root)
			if (err != nil) != tc.wantErr {
				t.Fatalf("mirror: %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "CTRPERF_BASE_IMAGE") {
					t.Errorf("error %q does not say how to name one's own image", err)
				}
				return
			}
			if got != tc.want {
				t.Errorf("mirror = %q, want %q", got, tc.want)
			}
		})
	}
	if m, err := (Base{Suite: "bookworm", Mirror: "http://explicit"}).mirror("testdata/apt-none"); err != nil || m != "http://explicit" {
		t.Errorf("an explicit mirror = %q, %v; want it used as is", m, err)
	}
}

func TestParseOneLineSources(t *testing.T) {
	in := "deb [arch=amd64] http://a/debian bookworm main contrib\n#deb http://commented bookworm main\ndeb http://b/debian trixie\nbroken\ndeb [unclosed http://c bookworm main\n"
	if _, err := parseOneLineSources(strings.NewReader(in)); err == nil {
		t.Error("an unclosed [ was accepted")
	}
	got, err := parseOneLineSources(strings.NewReader(strings.Split(in, "deb [unclosed")[0]))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].URI != "http://a/debian" || strings.Join(got[0].Components, ",") != "main,contrib" || got[1].Suites[0] != "trixie" || len(got[1].Components) != 0 {
		t.Errorf("parsed %+v", got)
	}
}

func TestDebootstrapOutput(t *testing.T) {
	tests := []struct {
		desc        string
		fixture     string
		unreachable bool
		progress    []string // phases printed, in order
	}{
		{"mirror unreachable", "unreachable.txt", true, []string{"Retrieving InRelease"}},
		{"unknown package is not a network problem", "badpackage.txt", false, []string{"Retrieving InRelease", "Checking Release signature", "Valid Release signature", "Retrieving Packages", "Resolving dependencies of required packages"}},
		{"success: one line per phase, not per package", "success.txt", false, []string{
			"Retrieving InRelease", "Checking Release signature", "Valid Release signature", "Retrieving Packages",
			"Resolving dependencies", "Checking component main", "Retrieving adduser", "Chosen extractor",
			"Extracting adduser", "Installing core packages", "Unpacking required packages", "Configuring required packages",
			"Unpacking the base system", "Configuring the base system", "Base system installed successfully"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f, err := os.Open(filepath.Join("testdata/debootstrap", tc.fixture))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var progress bytes.Buffer
			tail := followDebootstrap(f, &progress, "base", time.Now())
			lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
			if len(lines) != len(tc.progress) {
				t.Fatalf("progress lines:\n%s\nwant %d lines", progress.String(), len(tc.progress))
			}
			for i, want := range tc.progress {
				if !strings.Contains(lines[i], want) {
					t.Errorf("progress line %d = %q, want it to contain %q", i, lines[i], want)
				}
			}
			err = debootstrapError("http://deb.debian.org/debian", errors.New("exit status 1"), tail)
			if got := errors.Is(err, ErrMirrorUnreachable); got != tc.unreachable {
				t.Errorf("errors.Is(ErrMirrorUnreachable) = %v, want %v: %v", got, tc.unreachable, err)
			}
			if tc.unreachable {
				for _, want := range []string{"could not reach the Debian mirror http://deb.debian.org/debian", "check network/proxy", "--base-image / CTRPERF_BASE_IMAGE"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q lacks %q", err, want)
					}
				}
			}
		})
	}
}

func TestMountsUnder(t *testing.T) {
	f, err := os.Open("testdata/mountinfo-debootstrap")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := mountsUnder(f, "/var/cache/ctrperf/debian-base-abc.rootfs")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/var/cache/ctrperf/debian-base-abc.rootfs/sys/fs/cgroup", "/var/cache/ctrperf/debian-base-abc.rootfs/proc", "/var/cache/ctrperf/debian-base-abc.rootfs/sys"}
	if len(got) != 3 || got[0] != want[0] || !(got[1] == want[1] && got[2] == want[2] || got[1] == want[2] && got[2] == want[1]) {
		t.Errorf("mountsUnder = %v, want %v (deepest first, not the -other sibling)", got, want)
	}
	f2 := strings.NewReader("305 22 0:24 / /tmp/with\\040space/x rw - tmpfs tmpfs rw\n")
	if got, _ := mountsUnder(f2, "/tmp/with space"); len(got) != 1 || got[0] != "/tmp/with space/x" {
		t.Errorf("escaped mount point: %v", got)
	}
}

func TestFindUp(t *testing.T) {
	root := t.TempDir()
	deep := filepath.Join(root, "a", "b", "c")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "a", "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := findUp(deep, "go.mod"); err != nil || got != filepath.Join(root, "a") {
		t.Errorf("findUp = %q, %v; want %s", got, err, filepath.Join(root, "a"))
	}
	if _, err := findUp(deep, "no-such-marker-file"); err == nil {
		t.Error("findUp found a file that does not exist")
	}
	// The test runs inside this module: its root has ctrperf's go.mod.
	mod, err := ModuleRoot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(mod, "go.mod")); err != nil || !strings.HasPrefix(string(b), "module ctrperf\n") {
		t.Errorf("ModuleRoot = %s, whose go.mod is not ctrperf's (%v)", mod, err)
	}
}

func TestImportChanges(t *testing.T) {
	got := importChanges(imageLabels("debian-base", "0123456789abcdef", map[string]string{"ctrperf.run": "t1"}))
	want := []string{
		`ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`,
		`CMD ["/bin/bash"]`,
		`LABEL ctrperf.image="debian-base"`,
		`LABEL ctrperf.managed="true"`,
		`LABEL ctrperf.recipe="0123456789abcdef"`,
		`LABEL ctrperf.run="t1"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("changes:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRefName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"ctrperf/debian-base:latest", "ctrperf/debian-base"},
		{"ctrperf/debian-base", "ctrperf/debian-base"},
		{"localhost:5000/x", "localhost:5000/x"},
		{"localhost:5000/x:1", "localhost:5000/x"},
	} {
		if got := refName(tc.in); got != tc.want {
			t.Errorf("refName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestGuestDockerRecipe: the disk of a VM guest with Docker is Debian's
// docker.io and iptables on the Debian base's suite, a recipe (and hash)
// of its own; its tarball, once in the cache, is taken as it is (a
// cancelled context: nothing is built).
func TestGuestDockerRecipe(t *testing.T) {
	g := GuestDocker
	for _, p := range []string{"docker.io", "iptables"} {
		if !slices.Contains(g.Packages, p) {
			t.Errorf("the guest's rootfs lacks %s: %v", p, g.Packages)
		}
	}
	if g.Suite != DebianBase.Suite || g.Variant != DebianBase.Variant || g.Name == DebianBase.Name {
		t.Errorf("recipe %+v: want the Debian base's suite and variant under a name of its own", g)
	}
	if baseHash(g, "http://m", "amd64") == baseHash(DebianBase, "http://m", "amd64") {
		t.Error("the guest's rootfs has the Debian base's recipe hash")
	}
	g.Mirror = "http://m"
	dir := t.TempDir()
	want := filepath.Join(dir, g.Name+"-"+baseHash(g, "http://m", debArch())+".tar")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := BaseTarball(ctx, g, WithCacheDir(dir)); err == nil {
		t.Error("no tarball in the cache and a cancelled context: no error")
	}
	if err := os.WriteFile(want, []byte("rootfs"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, hash, err := BaseTarball(ctx, g, WithCacheDir(dir))
	if err != nil || got != want || !strings.Contains(want, hash) {
		t.Errorf("BaseTarball = %s, %s, %v; want the cached %s", got, hash, err, want)
	}
}
