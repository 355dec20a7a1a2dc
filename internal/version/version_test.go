package version

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	stamped := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-01-02T03:04:05Z"}, {Key: "vcs.modified", Value: "true"}}}, true
	}
	none := func() (*debug.BuildInfo, bool) { return nil, false }
	devel := func() (*debug.BuildInfo, bool) {
		return &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}}, true
	}
	defer func(v, c, d string) { Version, Commit, Date = v, c, d }(Version, Commit, Date)
	tests := []struct {
		desc          string
		v, c, d       string
		read          func() (*debug.BuildInfo, bool)
		want, wantNot string
	}{
		{"ldflags win", "v1.2.3", "feedbeef", "2026-11-23T20:00:00Z", stamped,
			"ctrperf v1.2.3 (commit feedbeef, modified, built from 2026-11-23T20:00:00Z, go1.99 ", ""},
		{"dirty version says it already", "v1.2.3-dirty", "feedbeef", "", stamped, "ctrperf v1.2.3-dirty (commit feedbeef, built from 2026-01-02T03:04:05Z", "modified"},
		{"build info fills in", "dev", "", "", stamped, "ctrperf v0.3.0 (commit 0123456789ab, modified, built from 2026-01-02T03:04:05Z, go1.99 ", ""},
		{"nothing known", "dev", "", "", none, "ctrperf dev (go1.", "commit"},
		{"devel module", "dev", "", "", devel, "ctrperf dev (go1.99 ", "commit"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			Version, Commit, Date = tc.v, tc.c, tc.d
			got := get(tc.read).String()
			if !strings.HasPrefix(got, tc.want) || (tc.wantNot != "" && strings.Contains(got, tc.wantNot)) {
				t.Errorf("got %q, want it to start with %q and lack %q", got, tc.want, tc.wantNot)
			}
		})
	}
}
