// Package version carries the build's version, set with -ldflags.
package version

// Version is overridden at build time: -ldflags "-X ctrperf/internal/version.Version=...".
var Version = "dev"
