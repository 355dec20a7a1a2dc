package image

import (
	"context"
	"errors"
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
