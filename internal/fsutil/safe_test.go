package fsutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"ctrperf/internal/testenv"
)

// nobody owns what "another user" owns in these tests.
const nobody = 65534

func mkdir(t *testing.T, path string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(path, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

// refused fails t unless err is an *UnsafePathError naming path.
func refused(t *testing.T, err error, path string) {
	t.Helper()
	var ue *UnsafePathError
	if !errors.As(err, &ue) || ue.Path != path || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want it to refuse %s", err, path)
	}
}

type dirCase struct {
	desc string
	// setup builds the tree under root and returns the directory to
	// check and the path a refusal must name ("" means accepted).
	setup   func(t *testing.T, root string) (dir, refuse string)
	wantErr error // errors.Is target instead of a refusal
}

func runDirCases(t *testing.T, tests []dirCase, check func(string) error) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			root := t.TempDir()
			dir, refuse := tt.setup(t, root)
			err := check(dir)
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
			case refuse != "":
				refused(t, err, refuse)
			case err != nil:
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestCheckDir(t *testing.T) {
	tests := []dirCase{
		{desc: "own directory 0755", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o755)
			return d, ""
		}},
		{desc: "own sticky world-writable directory", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o777|os.ModeSticky)
			return d, ""
		}},
		{desc: "a symlink as the directory is refused", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "real"), 0o755)
			d := filepath.Join(root, "out")
			symlink(t, "real", d)
			return d, d
		}},
		{desc: "world-writable without sticky bit", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o777)
			return d, d
		}},
		{desc: "group-writable", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o775)
			return d, d
		}},
		{desc: "a world-writable directory above, not sticky", setup: func(t *testing.T, root string) (string, string) {
			up := filepath.Join(root, "shared")
			mkdir(t, filepath.Join(up, "out"), 0o755)
			mkdir(t, up, 0o777)
			return filepath.Join(up, "out"), up
		}},
		{desc: "a sticky world-writable directory above (like /tmp)", setup: func(t *testing.T, root string) (string, string) {
			up := filepath.Join(root, "tmp")
			mkdir(t, filepath.Join(up, "out"), 0o755)
			mkdir(t, up, 0o777|os.ModeSticky)
			return filepath.Join(up, "out"), ""
		}},
		{desc: "a symlink on the way to a safe directory", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "real", "out"), 0o755)
			symlink(t, filepath.Join(root, "real"), filepath.Join(root, "link"))
			return filepath.Join(root, "link", "out"), ""
		}},
		{desc: "a symlink on the way through a world-writable directory", setup: func(t *testing.T, root string) (string, string) {
			shared := filepath.Join(root, "shared")
			mkdir(t, filepath.Join(shared, "out", "sub"), 0o755)
			mkdir(t, shared, 0o777)
			symlink(t, "shared/out", filepath.Join(root, "link"))
			return filepath.Join(root, "link", "sub"), shared
		}},
		{desc: "missing", wantErr: os.ErrNotExist, setup: func(t *testing.T, root string) (string, string) {
			return filepath.Join(root, "missing"), ""
		}},
		{desc: "a file, not a directory", wantErr: syscall.ENOTDIR, setup: func(t *testing.T, root string) (string, string) {
			write(t, filepath.Join(root, "f"), "x", 0o644)
			return filepath.Join(root, "f", "out"), ""
		}},
	}
	runDirCases(t, tests, CheckDir)
}

func TestCheckDirFollow(t *testing.T) {
	tests := []dirCase{
		{desc: "an own symlink to a safe directory", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "real"), 0o755)
			symlink(t, "real", filepath.Join(root, "latest"))
			return filepath.Join(root, "latest"), ""
		}},
		{desc: "an own symlink to a world-writable directory", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "shared"), 0o777)
			symlink(t, "shared", filepath.Join(root, "latest"))
			return filepath.Join(root, "latest"), filepath.Join(root, "latest")
		}},
		{desc: "a symlink through a world-writable directory", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "shared", "real"), 0o755)
			mkdir(t, filepath.Join(root, "shared"), 0o777)
			symlink(t, "shared/real", filepath.Join(root, "latest"))
			return filepath.Join(root, "latest"), filepath.Join(root, "shared")
		}},
	}
	runDirCases(t, tests, CheckDirFollow)
}

// TestCheckDirOwnerRoot: directories of another user (uid 65534), which
// only root can make here.
func TestCheckDirOwnerRoot(t *testing.T) {
	testenv.RequireRoot(t, "chown to another user")
	tests := []dirCase{
		{desc: "owned by another user", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o755)
			chown(t, d, nobody)
			return d, d
		}},
		{desc: "sticky world-writable and owned by another user", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o777|os.ModeSticky)
			chown(t, d, nobody)
			return d, d
		}},
		{desc: "a directory above owned by another user", setup: func(t *testing.T, root string) (string, string) {
			up := filepath.Join(root, "home")
			mkdir(t, filepath.Join(up, "out"), 0o755)
			chown(t, up, nobody)
			return filepath.Join(up, "out"), up
		}},
		{desc: "another user's symlink in a sticky directory on the way", setup: func(t *testing.T, root string) (string, string) {
			tmp := filepath.Join(root, "tmp")
			mkdir(t, filepath.Join(root, "real", "out"), 0o755)
			mkdir(t, tmp, 0o777|os.ModeSticky)
			link := filepath.Join(tmp, "link")
			symlink(t, filepath.Join(root, "real"), link)
			chown(t, link, nobody)
			return filepath.Join(link, "out"), link
		}},
	}
	runDirCases(t, tests, CheckDir)
}

// makeDirUmask002 is MakeDir under a umask that would leave what it makes
// group-writable.
func makeDirUmask002(dir string) error {
	old := syscall.Umask(0o002)
	defer syscall.Umask(old)
	return MakeDir(dir)
}

func TestMakeDir(t *testing.T) {
	tests := []dirCase{
		{desc: "a new chain of directories", setup: func(t *testing.T, root string) (string, string) {
			return filepath.Join(root, "a", "b", "out"), ""
		}},
		{desc: "new under a sticky world-writable directory", setup: func(t *testing.T, root string) (string, string) {
			mkdir(t, filepath.Join(root, "tmp"), 0o777|os.ModeSticky)
			return filepath.Join(root, "tmp", "out"), ""
		}},
		{desc: "a symlink planted where it would be made", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			symlink(t, filepath.Join(root, "elsewhere"), d)
			return d, d
		}},
		{desc: "an existing world-writable one", setup: func(t *testing.T, root string) (string, string) {
			d := filepath.Join(root, "out")
			mkdir(t, d, 0o777)
			return d, d
		}},
	}
	runDirCases(t, tests, makeDirUmask002)
	t.Run("what it makes is 0755 whatever the umask", func(t *testing.T) {
		d := filepath.Join(t.TempDir(), "a", "out")
		if err := makeDirUmask002(d); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{d, filepath.Dir(d)} {
			if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("%s: %v %v, want 0755", p, fi.Mode(), err)
			}
		}
	})
}

func TestMakeDirOtherUsersRoot(t *testing.T) {
	testenv.RequireRoot(t, "chown to another user")
	runDirCases(t, []dirCase{
		{desc: "one another user made first in a shared directory", setup: func(t *testing.T, root string) (string, string) {
			tmp := filepath.Join(root, "tmp")
			mkdir(t, tmp, 0o777|os.ModeSticky)
			d := filepath.Join(tmp, "out")
			mkdir(t, d, 0o755)
			chown(t, d, nobody)
			return d, d
		}},
		{desc: "another user's symlink planted in a shared directory on the way", setup: func(t *testing.T, root string) (string, string) {
			tmp := filepath.Join(root, "tmp")
			mkdir(t, tmp, 0o777|os.ModeSticky)
			link := filepath.Join(tmp, "out")
			symlink(t, filepath.Join(root, "elsewhere"), link)
			chown(t, link, nobody)
			t.Cleanup(func() {
				if _, err := os.Lstat(filepath.Join(root, "elsewhere")); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("the link's target was created (%v)", err)
				}
			})
			return filepath.Join(link, "sub"), link
		}},
	}, MakeDir)
}

func TestOpenTrusted(t *testing.T) {
	const (
		wr   = os.O_CREATE | os.O_APPEND | os.O_WRONLY
		excl = os.O_CREATE | os.O_EXCL | os.O_WRONLY
	)
	tests := []struct {
		desc    string
		setup   func(t *testing.T, dir string) // makes dir/f (and more)
		flag    int
		refuse  bool  // an *UnsafePathError naming dir/f
		wantErr error // errors.Is, instead
	}{
		{desc: "a new file", flag: wr},
		{desc: "an own file", flag: wr, setup: func(t *testing.T, dir string) { write(t, filepath.Join(dir, "f"), "", 0o644) }},
		{desc: "a symlink to a file", flag: wr, refuse: true, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "target"), "target", 0o644)
			symlink(t, "target", filepath.Join(dir, "f"))
		}},
		{desc: "a dangling symlink is not created through", flag: wr, refuse: true, setup: func(t *testing.T, dir string) {
			symlink(t, filepath.Join(dir, "created"), filepath.Join(dir, "f"))
		}},
		{desc: "a symlink, read", flag: os.O_RDONLY, refuse: true, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "target"), "target", 0o644)
			symlink(t, "target", filepath.Join(dir, "f"))
		}},
		{desc: "world-writable", flag: os.O_RDONLY, refuse: true, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "f"), "", 0o666)
		}},
		{desc: "group-writable", flag: wr, refuse: true, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "f"), "", 0o664)
		}},
		{desc: "a hard link, written", flag: wr, refuse: true, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "target"), "target", 0o644)
			if err := os.Link(filepath.Join(dir, "target"), filepath.Join(dir, "f")); err != nil {
				t.Fatal(err)
			}
		}},
		{desc: "a hard link, read", flag: os.O_RDONLY, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "target"), "target", 0o644)
			if err := os.Link(filepath.Join(dir, "target"), filepath.Join(dir, "f")); err != nil {
				t.Fatal(err)
			}
		}},
		{desc: "a directory", flag: os.O_RDONLY, refuse: true, setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "f"), 0o755)
		}},
		{desc: "exclusive over an existing file", flag: excl, wantErr: os.ErrExist, setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "f"), "", 0o644)
		}},
		{desc: "exclusive over a dangling symlink", flag: excl, wantErr: os.ErrExist, setup: func(t *testing.T, dir string) {
			symlink(t, filepath.Join(dir, "created"), filepath.Join(dir, "f"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := t.TempDir()
			if tt.setup != nil {
				tt.setup(t, dir)
			}
			p := filepath.Join(dir, "f")
			f, err := OpenTrusted(p, tt.flag, 0o644)
			if err == nil {
				if tt.flag != os.O_RDONLY {
					_, err = f.WriteString("written")
				}
				f.Close()
			}
			switch {
			case tt.refuse:
				refused(t, err, p)
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("error %v, want %v", err, tt.wantErr)
				}
			case err != nil:
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "target")); err == nil && string(b) != "target" {
				t.Errorf("written through to the target: %q", b)
			}
			if _, err := os.Lstat(filepath.Join(dir, "created")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a file was created through the link (%v)", err)
			}
		})
	}
}

func TestOpenTrustedOwnerRoot(t *testing.T) {
	testenv.RequireRoot(t, "chown to another user")
	p := filepath.Join(t.TempDir(), "f")
	write(t, p, "", 0o644)
	chown(t, p, nobody)
	_, err := OpenTrusted(p, os.O_RDONLY, 0)
	refused(t, err, p)
}

func TestCheckEntries(t *testing.T) {
	tests := []struct {
		desc   string
		setup  func(t *testing.T, dir string)
		refuse string // entry refused, "" accepted
	}{
		{desc: "own files and directories", setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "results.jsonl"), "", 0o644)
			mkdir(t, filepath.Join(dir, "isolate"), 0o755)
		}},
		{desc: "a symlink", refuse: "results.jsonl", setup: func(t *testing.T, dir string) {
			symlink(t, "/tmp/x/created", filepath.Join(dir, "results.jsonl"))
		}},
		{desc: "a world-writable file", refuse: "plan.yaml", setup: func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "plan.yaml"), "", 0o666)
		}},
		{desc: "a world-writable directory", refuse: "isolate", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "isolate"), 0o777)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			dir := t.TempDir()
			tt.setup(t, dir)
			err := CheckEntries(dir)
			if tt.refuse == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			refused(t, err, filepath.Join(dir, tt.refuse))
		})
	}
}

func TestLock(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".lock")
	first, err := Lock(p)
	if err != nil {
		t.Fatal(err)
	}
	// flock belongs to the open file, so a second Lock in this process
	// is refused like another process's would be.
	_, err = Lock(p)
	var le *LockedError
	if !errors.As(err, &le) || le.Path != p || le.PID != os.Getpid() ||
		!strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "pid "+strconv.Itoa(os.Getpid())) {
		t.Fatalf("second Lock: %v, want a LockedError naming %s and pid %d", err, p, os.Getpid())
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Lock(p)
	if err != nil {
		t.Fatalf("Lock after Close: %v", err)
	}
	again.Close()

	link := filepath.Join(dir, "link.lock")
	symlink(t, filepath.Join(dir, "created"), link)
	_, err = Lock(link)
	refused(t, err, link)
}

// TestLockWaitsOutForkedChild: a child that shares this process's lock file
// (as one forked by another goroutine does until its exec) holds the flock
// after Close; Lock waits for it instead of refusing with our own pid, and
// still refuses when the holder outlasts the wait.
func TestLockWaitsOutForkedChild(t *testing.T) {
	p := filepath.Join(t.TempDir(), ".lock")
	hold := func(d string) *exec.Cmd {
		first, err := Lock(p)
		if err != nil {
			t.Fatal(err)
		}
		child := exec.Command("sleep", d)
		child.ExtraFiles = []*os.File{first.f}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		first.Close()
		return child
	}
	child := hold("0.3")
	start := time.Now()
	again, err := Lock(p)
	if err != nil {
		t.Fatalf("Lock while a child shares the closed lock for 0.3 s: %v", err)
	}
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Errorf("Lock took %v: the child's share of the lock was not in the way, the test proves nothing", waited)
	}
	again.Close()
	_ = child.Wait()

	child = hold("10")
	defer func() { _ = child.Process.Kill(); _ = child.Wait() }()
	var le *LockedError
	if _, err := Lock(p); !errors.As(err, &le) || le.PID != os.Getpid() {
		t.Fatalf("Lock while a child holds it for 10 s: %v, want a LockedError naming pid %d", err, os.Getpid())
	}
}
