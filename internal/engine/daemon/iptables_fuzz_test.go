package daemon

import (
	"strings"
	"testing"
)

// FuzzParseIPTablesSave: iptables-save output that parses gives rules with
// a table and a chain, and the comparisons the restore makes are
// consistent on it (a rule set misses nothing of itself). Seed corpus: the
// fixtures below and testdata/fuzz/FuzzParseIPTablesSave.
func FuzzParseIPTablesSave(f *testing.F) {
	f.Add("*nat\n:DOCKER - [0:0]\n-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER\n-A DOCKER ! -i docker0 -p tcp -m tcp --dport 8080 -j DNAT --to-destination 172.17.0.2:80\nCOMMIT\n")
	f.Add("*filter\n-A DOCKER -d 172.17.0.2/32 ! -i docker0 -o docker0 -p tcp -m comment --comment \"a \\\"b\\\" c\" -j ACCEPT\nCOMMIT\n")
	f.Add("-A\n-A \"\n*\n-A X \"unbalanced\n")
	f.Fuzz(func(t *testing.T, data string) {
		rules, err := parseIPTablesSave(strings.NewReader(data))
		if err != nil {
			return
		}
		for _, r := range rules {
			if r.Chain == "" || r.Table == "" {
				t.Fatalf("rule with no chain from %q: %+v", data, r)
			}
			_ = r.String()
		}
		if m := missingRules(rules, rules); len(m) != 0 {
			t.Fatalf("a rule set misses %d of its own rules: %v", len(m), m)
		}
		_ = dockerChainRules(rules)
		_ = jumpRules(rules)
	})
}
