package isolate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// DefaultKubeletDir is kubelet's root directory unless --root-dir moved it.
const DefaultKubeletDir = "/var/lib/kubelet"

// KubeletCPUManagerPolicy is the CPU manager policy of the kubelet whose
// root directory is dir, from the checkpoint it keeps there
// (cpu_manager_state: {"policyName": "static", ...}). A kubelet that never
// wrote one runs the default policy, "none".
func KubeletCPUManagerPolicy(dir string) (string, error) {
	path := filepath.Join(dir, "cpu_manager_state")
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return "none", nil
	}
	if err != nil {
		return "", err
	}
	var st struct {
		PolicyName string `json:"policyName"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if st.PolicyName == "" {
		return "", fmt.Errorf("%s names no policyName", path)
	}
	return st.PolicyName, nil
}
