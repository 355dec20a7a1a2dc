// Package version carries the build's version, commit and date, set with
// -ldflags by `make build` and falling back on what the Go toolchain
// recorded in the binary (runtime/debug.ReadBuildInfo).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Set at build time:
//
//	-ldflags "-X ctrperf/internal/version.Version=v1.2.3
//	          -X ctrperf/internal/version.Commit=<sha>
//	          -X ctrperf/internal/version.Date=<RFC 3339>"
var (
	Version = "dev"
	Commit  = ""
	Date    = ""
)

// Info is what `ctrperf --version` says.
type Info struct {
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Date     string `json:"date,omitempty"` // of the commit the binary was built from
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// Get returns the build's Info: the -ldflags values, else the module
// version and VCS stamps the toolchain recorded.
func Get() Info { return get(debug.ReadBuildInfo) }

func get(read func() (*debug.BuildInfo, bool)) Info {
	in := Info{Version: Version, Commit: Commit, Date: Date, Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := read()
	if !ok {
		return in
	}
	if bi.GoVersion != "" {
		in.Go = bi.GoVersion
	}
	if in.Version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version // go install ctrperf/cmd/ctrperf@vX
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			if in.Commit == "" {
				in.Commit = s.Value
			}
		case "vcs.time":
			if in.Date == "" {
				in.Date = s.Value
			}
		case "vcs.modified":
			in.Modified = s.Value == "true" && !strings.HasSuffix(in.Version, "-dirty")
		}
	}
	return in
}

// String is one line: "ctrperf v1.2.3 (commit 0f54799, 2026-11-23T20:00:00Z, go1.26.8 linux/amd64)".
func (in Info) String() string {
	var parts []string
	if in.Commit != "" {
		c := in.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		if in.Modified {
			c += ", modified"
		}
		parts = append(parts, "commit "+c)
	}
	if in.Date != "" {
		parts = append(parts, "built from "+in.Date)
	}
	parts = append(parts, in.Go+" "+in.Platform)
	return fmt.Sprintf("ctrperf %s (%s)", in.Version, strings.Join(parts, ", "))
}
