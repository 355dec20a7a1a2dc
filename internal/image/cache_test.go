package image

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestBuildUnlessCached: the one cache decision of BuildFrom and BuildDir.
func TestBuildUnlessCached(t *testing.T) {
	buildErr := errors.New("step 3 failed")
	tests := []struct {
		desc       string
		have       string // recipe hash of the image the engine has under the ref; "" for none
		force      bool
		buildErr   error
		wantAction Action
		wantBuild  bool
		wantErr    error
	}{
		{"no image: built", "", false, nil, ActionBuilt, true, nil},
		{"the same recipe: cached, nothing built", "h1", false, nil, ActionCached, false, nil},
		{"another recipe: rebuilt", "h0", false, nil, ActionBuilt, true, nil},
		{"the same recipe, forced: rebuilt", "h1", true, nil, ActionBuilt, true, nil},
		{"a failed build is the error", "", false, buildErr, "", true, buildErr},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeEngine()
			if tc.have != "" {
				f.add(map[string]string{LabelRecipe: tc.have}, "t/x:latest")
			}
			var opts []Option
			if tc.force {
				opts = append(opts, WithForce())
			}
			built := false
			res, err := buildUnlessCached(context.Background(), f, Result{Name: "x", Ref: "t/x:latest", Hash: "h1"}, buildOptions(opts), func() error {
				built = true
				if tc.buildErr != nil {
					return tc.buildErr
				}
				f.add(map[string]string{LabelRecipe: "h1"}, "t/x:latest")
				return nil
			})
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if built != tc.wantBuild || res.Action != tc.wantAction {
				t.Errorf("built %v, action %q; want %v, %q", built, res.Action, tc.wantBuild, tc.wantAction)
			}
			if err == nil && res.ID != f.images["t/x:latest"].ID {
				t.Errorf("ID %s, want the engine's %s", res.ID, f.images["t/x:latest"].ID)
			}
		})
	}
}

// TestRebuildDropsReplaced: a rebuild removes the image it displaced from
// the ref, and only when that one is ctrperf's, untagged and unused.
func TestRebuildDropsReplaced(t *testing.T) {
	own := map[string]string{LabelManaged: "true", LabelName: "x", LabelRecipe: "h0"}
	tests := []struct {
		desc      string
		oldLabels map[string]string
		otherTag  string // another tag the old image keeps
		inUse     bool   // a container uses the old image
		wantGone  bool
	}{
		{"ctrperf's old image, untagged: removed", own, "", false, true},
		{"the old image keeps another tag: stays", own, "mine/x:v1", false, false},
		{"a container uses the old image: stays", own, "", true, false},
		{"not labelled as ctrperf's: stays", map[string]string{LabelRecipe: "h0"}, "", false, false},
		{"another recipe's name (passed on by FROM): stays", map[string]string{LabelManaged: "true", LabelName: "y", LabelRecipe: "h0"}, "", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeEngine()
			refs := []string{"t/x:latest"}
			if tc.otherTag != "" {
				refs = append(refs, tc.otherTag)
			}
			old := f.add(tc.oldLabels, refs...)
			f.inUse[old.ID] = tc.inUse
			var progress strings.Builder
			res, err := buildUnlessCached(context.Background(), f, Result{Name: "x", Ref: "t/x:latest", Hash: "h1"}, buildOptions([]Option{WithProgress(&progress)}), func() error {
				f.add(map[string]string{LabelManaged: "true", LabelName: "x", LabelRecipe: "h1"}, "t/x:latest")
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			_, still := f.byID[old.ID]
			if still == tc.wantGone {
				t.Errorf("old image still there: %v, want gone: %v (progress %q)", still, tc.wantGone, progress.String())
			}
			if _, ok := f.byID[res.ID]; !ok || f.images["t/x:latest"].ID != res.ID {
				t.Errorf("the new image %s is not under the ref", res.ID)
			}
			if tc.inUse && !strings.Contains(progress.String(), "stays") {
				t.Errorf("progress %q does not say the old image stays", progress.String())
			}
		})
	}
}
