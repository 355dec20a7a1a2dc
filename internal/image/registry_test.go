package image

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var testBase = Base{Name: "base", Repo: "t/base", Suite: "bookworm", Variant: "minbase", Packages: []string{"fio"}, Mirror: "http://mirror.invalid/debian"}

func testRegistry(env map[string]string) *Registry {
	r := NewRegistry(mapEnv(env))
	b := testBase
	r.MustRegister(Recipe{Name: "base", Base: &b})
	r.MustRegister(Recipe{Name: "app", Derived: &Derived{Ref: "t/app:latest", From: "base", Files: map[string]File{"/etc/app.conf": {Data: []byte("x=1\n")}}, Cmd: []string{"app"}}})
	r.MustRegister(Recipe{Name: "solo", Derived: &Derived{Ref: "t/solo:latest", From: Scratch, Files: map[string]File{"/data": {Data: []byte("d")}}}})
	return r
}

func testBaseHash() string { return baseHash(testBase, testBase.Mirror, debArch()) }

// withBase puts a current base image on the fake engine.
func withBase(f *fakeEngine) {
	f.add(imageLabels("base", testBaseHash(), nil), "t/base:"+testBaseHash(), "t/base:latest")
}

func TestEnvName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"debian-base", "CTRPERF_IMAGE_DEBIAN_BASE"},
		{"ticketd", "CTRPERF_IMAGE_TICKETD"},
		{"web.combined", "CTRPERF_IMAGE_WEB_COMBINED"},
	} {
		if got := EnvName(tc.name); got != tc.want {
			t.Errorf("EnvName(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestResolve(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		flag map[string]string
		in   string
		want string
	}{
		{"recipe name gives its ref", nil, nil, "app", "t/app:latest"},
		{"recipe ref gives itself", nil, nil, "t/app:latest", "t/app:latest"},
		{"repository without tag finds the recipe", nil, nil, "t/app", "t/app:latest"},
		{"unknown ref is left alone", nil, nil, "busybox:1", "busybox:1"},
		{"env overrides by name", map[string]string{"CTRPERF_IMAGE_APP": "reg/app:7"}, nil, "app", "reg/app:7"},
		{"env overrides when asked by ref", map[string]string{"CTRPERF_IMAGE_APP": "reg/app:7"}, nil, "t/app:latest", "reg/app:7"},
		{"flag wins over env", map[string]string{"CTRPERF_IMAGE_APP": "reg/app:7"}, map[string]string{"app": "flag/app:8"}, "app", "flag/app:8"},
		{"CTRPERF_BASE_IMAGE is only for the Debian base", map[string]string{BaseImageEnv: "reg/debian:12"}, nil, "base", "t/base:latest"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := testRegistry(tc.env)
			for k, v := range tc.flag {
				r.Override(k, v)
			}
			if got := r.Resolve(tc.in); got != tc.want {
				t.Errorf("Resolve(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	r := NewRegistry(mapEnv(map[string]string{BaseImageEnv: "reg/debian:12"}))
	b := DebianBase
	r.MustRegister(Recipe{Name: b.Name, Base: &b})
	if got := r.Resolve("debian-base"); got != "reg/debian:12" {
		t.Errorf("CTRPERF_BASE_IMAGE: Resolve(debian-base) = %q", got)
	}
}

func TestEnsure(t *testing.T) {
	boom := errors.New("engine down")
	tests := []struct {
		desc      string
		env       map[string]string
		setup     func(t *testing.T, f *fakeEngine, cacheDir string)
		refs      []string
		want      []Action
		wantRefs  []string
		wantErr   string
		errIs     error
		wantFrom  string // FROM line of the last build
		wantNoBld bool
	}{
		{desc: "derived builds FROM its parent's resolved ref", setup: func(t *testing.T, f *fakeEngine, _ string) { withBase(f) },
			refs: []string{"app"}, want: []Action{ActionBuilt}, wantRefs: []string{"t/app:latest"}, wantFrom: "FROM t/base:latest"},
		{desc: "asking twice builds once", setup: func(t *testing.T, f *fakeEngine, _ string) { withBase(f) },
			refs: []string{"app", "t/app:latest"}, want: []Action{ActionBuilt, ActionCached}},
		{desc: "a rebuilt parent makes the derived image stale", setup: func(t *testing.T, f *fakeEngine, _ string) {
			withBase(f)
			r := testRegistry(nil)
			if _, err := r.Ensure(context.Background(), f, []string{"app"}); err != nil {
				t.Fatal(err)
			}
			withBase(f) // same recipe, new image ID (a re-import)
		}, refs: []string{"app"}, want: []Action{ActionBuilt}},
		{desc: "parent overridden: built FROM the user's image", env: map[string]string{"CTRPERF_IMAGE_BASE": "reg/debian:12"},
			setup: func(t *testing.T, f *fakeEngine, _ string) { f.add(nil, "reg/debian:12") },
			refs:  []string{"app"}, want: []Action{ActionBuilt}, wantFrom: "FROM reg/debian:12"},
		{desc: "overridden image present: only checked", env: map[string]string{"CTRPERF_IMAGE_APP": "reg/app:1"},
			setup: func(t *testing.T, f *fakeEngine, _ string) { f.add(nil, "reg/app:1") },
			refs:  []string{"app"}, want: []Action{ActionExternal}, wantRefs: []string{"reg/app:1"}, wantNoBld: true},
		{desc: "overridden image missing: error naming the variable, nothing built", env: map[string]string{"CTRPERF_IMAGE_APP": "reg/app:1"},
			setup: func(t *testing.T, f *fakeEngine, _ string) { withBase(f) },
			refs:  []string{"app"}, wantErr: "CTRPERF_IMAGE_APP", errIs: ErrMissing, wantNoBld: true},
		{desc: "unknown image present", setup: func(t *testing.T, f *fakeEngine, _ string) { f.add(nil, "busybox:1") },
			refs: []string{"busybox:1"}, want: []Action{ActionExternal}},
		{desc: "unknown image missing", setup: func(t *testing.T, f *fakeEngine, _ string) {},
			refs: []string{"busybox:1"}, wantErr: "never pulls", errIs: ErrMissing},
		{desc: "base cached by hash: only tagged latest", setup: func(t *testing.T, f *fakeEngine, _ string) {
			f.add(imageLabels("base", testBaseHash(), nil), "t/base:"+testBaseHash())
		}, refs: []string{"base"}, want: []Action{ActionCached}, wantRefs: []string{"t/base:latest"}},
		{desc: "base copied with only its latest tag: cached, hash tag restored", setup: func(t *testing.T, f *fakeEngine, _ string) {
			f.add(imageLabels("base", testBaseHash(), nil), "t/base:latest")
		}, refs: []string{"base", "t/base:" + testBaseHash()}, want: []Action{ActionCached, ActionExternal}, wantNoBld: true},
		{desc: "base imported from the cached tarball", setup: func(t *testing.T, f *fakeEngine, dir string) {
			os.WriteFile(filepath.Join(dir, "base-"+testBaseHash()+".tar"), []byte("rootfs"), 0o644)
		}, refs: []string{"base"}, want: []Action{ActionImported}, wantRefs: []string{"t/base:latest"}},
		{desc: "base with a stale label is imported again", setup: func(t *testing.T, f *fakeEngine, dir string) {
			f.add(imageLabels("base", "0000000000000000", nil), "t/base:"+testBaseHash())
			os.WriteFile(filepath.Join(dir, "base-"+testBaseHash()+".tar"), []byte("rootfs"), 0o644)
		}, refs: []string{"base"}, want: []Action{ActionImported}},
		{desc: "scratch image with data files", setup: func(t *testing.T, f *fakeEngine, _ string) {},
			refs: []string{"solo"}, want: []Action{ActionBuilt}, wantFrom: "FROM scratch"},
		{desc: "a failed build step is the error", setup: func(t *testing.T, f *fakeEngine, _ string) { f.buildErr = "COPY failed: no space left" },
			refs: []string{"solo"}, wantErr: "COPY failed: no space left"},
		{desc: "engine errors are wrapped", setup: func(t *testing.T, f *fakeEngine, _ string) { f.err = boom },
			refs: []string{"solo"}, wantErr: "inspect image t/solo:latest", errIs: boom},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeEngine()
			dir := t.TempDir()
			tc.setup(t, f, dir)
			nBuilds := len(f.builds)
			r := testRegistry(tc.env)
			res, err := r.Ensure(context.Background(), f, tc.refs, WithCacheDir(dir))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tc.wantErr)
				}
				if tc.errIs != nil && !errors.Is(err, tc.errIs) {
					t.Errorf("err = %v, want errors.Is %v", err, tc.errIs)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.want != nil {
				if len(res) != len(tc.want) {
					t.Fatalf("results %+v, want actions %v", res, tc.want)
				}
				for i, a := range tc.want {
					if res[i].Action != a {
						t.Errorf("result %d: action %s, want %s", i, res[i].Action, a)
					}
					if _, err := f.ImageInspect(context.Background(), res[i].Ref); err != nil {
						t.Errorf("result %d: ref %s is not on the engine: %v", i, res[i].Ref, err)
					}
				}
			}
			for i, ref := range tc.wantRefs {
				if res[i].Ref != ref {
					t.Errorf("result %d: ref %s, want %s", i, res[i].Ref, ref)
				}
			}
			if tc.wantFrom != "" {
				last := f.builds[len(f.builds)-1]
				if !strings.HasPrefix(last.Dockerfile, tc.wantFrom+"\n") {
					t.Errorf("Dockerfile:\n%s\nwant it to start with %q", last.Dockerfile, tc.wantFrom)
				}
				if last.Labels[LabelManaged] != "true" || last.Labels[LabelRecipe] == "" || last.Labels[LabelName] == "" {
					t.Errorf("build labels %v lack managed/recipe/name", last.Labels)
				}
			}
			if tc.wantNoBld && (len(f.builds) != nBuilds || len(f.imports) != 0) {
				t.Errorf("built %d and imported %v, want nothing", len(f.builds)-nBuilds, f.imports)
			}
		})
	}
}

func TestEnsureCycle(t *testing.T) {
	r := NewRegistry(mapEnv(nil))
	r.MustRegister(Recipe{Name: "a", Derived: &Derived{Ref: "t/a:1", From: "b"}})
	r.MustRegister(Recipe{Name: "b", Derived: &Derived{Ref: "t/b:1", From: "a"}})
	if _, err := r.Ensure(context.Background(), newFakeEngine(), []string{"a"}); err == nil || !strings.Contains(err.Error(), "FROM itself") {
		t.Errorf("cycle: err = %v", err)
	}
}

func TestMustRegisterRejects(t *testing.T) {
	tests := []struct {
		desc string
		r    Recipe
	}{
		{"no name", Recipe{Derived: &Derived{Ref: "x"}}},
		{"no kind", Recipe{Name: "x"}},
		{"two kinds", Recipe{Name: "x", Derived: &Derived{Ref: "x"}, Go: &GoImage{Ref: "y"}}},
		{"no ref", Recipe{Name: "x", Go: &GoImage{Package: "./p"}}},
		{"duplicate", Recipe{Name: "solo", Derived: &Derived{Ref: "other"}}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			r := testRegistry(nil)
			defer func() {
				if recover() == nil {
					t.Error("accepted")
				}
			}()
			r.MustRegister(tc.r)
		})
	}
}

func TestStatus(t *testing.T) {
	f := newFakeEngine()
	withBase(f)
	r := testRegistry(map[string]string{"CTRPERF_IMAGE_SOLO": "reg/solo:1"})
	if _, err := r.Ensure(context.Background(), f, []string{"app"}); err != nil {
		t.Fatal(err)
	}
	f.add(imageLabels("gone", "1111111111111111", nil), "t/gone:latest")         // no recipe any more
	f.add(imageLabels("app", "2222222222222222", nil), "t/app:2222222222222222") // an older app, still tagged
	withBase(f)                                                                  // base re-imported: app is stale now
	st, err := r.Status(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]State{}
	for _, s := range st {
		got[s.Name+" "+s.Ref] = s.State
	}
	want := map[string]State{
		"app t/app:latest":           StateStale,
		"app t/app:2222222222222222": StateStale,
		"base t/base:latest":         StateCurrent,
		"gone t/gone:latest":         StateUnknown,
		"solo reg/solo:1":            StateMissing,
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: state %q, want %q (all: %v)", k, got[k], w, got)
		}
	}
	if len(st) != len(want) {
		t.Errorf("%d statuses %v, want %d", len(st), got, len(want))
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		desc        string
		names       []string
		inUse       []string
		wantRemoved []string
		wantLeft    []string
		wantErr     string
	}{
		{"by name removes every tag", []string{"base"}, nil, []string{"t/base:" + testBaseHash(), "t/base:latest"}, []string{"t/solo:latest", "busybox:1"}, ""},
		{"all ctrperf images, never others", nil, nil, []string{"t/base:" + testBaseHash(), "t/base:latest", "t/solo:latest"}, []string{"busybox:1"}, ""},
		{"one in use: the others still go", nil, []string{"t/solo:latest"}, []string{"t/base:" + testBaseHash(), "t/base:latest"}, []string{"t/solo:latest"}, "t/solo:latest"},
		{"unknown name", []string{"nope"}, nil, nil, []string{"t/base:latest"}, `no ctrperf image named "nope"`},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeEngine()
			withBase(f)
			f.add(imageLabels("solo", "3333333333333333", nil), "t/solo:latest")
			f.add(nil, "busybox:1")
			for _, u := range tc.inUse {
				f.inUse[u] = true
			}
			removed, err := Remove(context.Background(), f, tc.names)
			if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("err = %v, want %q", err, tc.wantErr)
			}
			if strings.Join(removed, ",") != strings.Join(tc.wantRemoved, ",") {
				t.Errorf("removed %v, want %v", removed, tc.wantRemoved)
			}
			for _, ref := range tc.wantLeft {
				if _, ok := f.images[ref]; !ok {
					t.Errorf("%s was removed", ref)
				}
			}
		})
	}
}

func TestDebootstraps(t *testing.T) {
	tests := []struct {
		desc string
		env  map[string]string
		in   string
		want bool
	}{
		{"the base itself", nil, "base", true},
		{"derived from the base, by ref", nil, "t/app:latest", true},
		{"from scratch", nil, "solo", false},
		{"unknown image", nil, "busybox:1", false},
		{"the user's own base", map[string]string{"CTRPERF_IMAGE_BASE": "reg/debian:12"}, "app", false},
		{"the user's own image", map[string]string{"CTRPERF_IMAGE_APP": "reg/app:7"}, "app", false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if got := testRegistry(tc.env).Debootstraps(tc.in); got != tc.want {
				t.Errorf("Debootstraps(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}
