package plans

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestEmbedsEveryPlanFile: the binary carries exactly the plan files of
// this directory, byte for byte.
func TestEmbedsEveryPlanFile(t *testing.T) {
	paths, err := filepath.Glob("*" + Ext)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, p := range paths {
		want = append(want, p[:len(p)-len(Ext)])
	}
	slices.Sort(want)
	if got := Names(); !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
	for _, name := range want {
		disk, err := os.ReadFile(FileName(name))
		if err != nil {
			t.Fatal(err)
		}
		for _, arg := range []string{name, name + Ext} {
			got, ok := Read(arg)
			if !ok || string(got) != string(disk) {
				t.Errorf("Read(%q): ok %v, %d bytes; the file has %d", arg, ok, len(got), len(disk))
			}
		}
	}
}

func TestReadRefusesWhatIsNoPlanName(t *testing.T) {
	for _, arg := range []string{"", ".yaml", "nope", "../plans/smoke", "plans/smoke", "./smoke", "README.md", "embed.go", ".", ".."} {
		if _, ok := Read(arg); ok {
			t.Errorf("Read(%q) found a plan", arg)
		}
	}
}
