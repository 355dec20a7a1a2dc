package daemon

import (
	"strings"
	"testing"
)

func TestParseDaemonFlags(t *testing.T) {
	tests := []struct {
		desc   string
		args   []string
		config string
		want   DaemonFlags
	}{
		{"defaults", nil, "", DaemonFlags{UserlandProxy: true, IPTables: true}},
		{"flag off", []string{"--userland-proxy=false"}, "", DaemonFlags{UserlandProxy: false, IPTables: true}},
		{"config off", nil, `{"userland-proxy": false, "iptables": false}`, DaemonFlags{}},
		{"flag beats config", []string{"--iptables"}, `{"iptables": false}`, DaemonFlags{UserlandProxy: true, IPTables: true}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := parseDaemonFlags(tt.args, []byte(tt.config)); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestServesHost(t *testing.T) {
	tests := []struct {
		desc string
		args []string
		host string
		want bool
	}{
		{"no -H serves the default socket", []string{"--pidfile", "/run/x.pid"}, "unix:///var/run/docker.sock", true},
		{"no -H does not serve another socket", nil, "unix:///run/ctrperf/engines/a/docker.sock", false},
		{"-H with space", []string{"-H", "unix:///run/ctrperf/engines/a/docker.sock"}, "unix:///run/ctrperf/engines/a/docker.sock", true},
		{"--host=", []string{"--host=unix:///x.sock"}, "unix:///x.sock", true},
		{"systemd fd://", []string{"-H", "fd://"}, "unix:///var/run/docker.sock", true},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := servesHost(tt.args, tt.host); got != tt.want {
				t.Errorf("servesHost(%v, %s) = %v, want %v", tt.args, tt.host, got, tt.want)
			}
		})
	}
}

func TestLoadStreamError(t *testing.T) {
	tests := []struct {
		desc, stream, wantErr string
	}{
		{"success", `{"stream":"Loaded image: a:b\n"}`, ""},
		{"error detail", `{"stream":"x"}{"errorDetail":{"message":"no space left"},"error":"no space left"}`, "no space left"},
		{"garbage", `{"stream":`, "read load progress"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			err := loadStreamError(strings.NewReader(tt.stream))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want %q", err, tt.wantErr)
			}
		})
	}
}
