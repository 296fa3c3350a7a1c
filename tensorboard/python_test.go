package tensorboard

import (
	"os"
	"os/exec"
	"testing"
)

// pythonWithTensorBoard returns a Python interpreter that imports tensorboard: $MCPRL_PYTHON, else the
// repository's test venv (.venv, made by scripts/test-setup.sh). Without one the test skips, and fails
// under CI=true.
func pythonWithTensorBoard(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("MCPRL_PYTHON"), "../.venv/bin/python"}
	for _, py := range candidates {
		if py == "" {
			continue
		}
		if err := exec.Command(py, "-c", "import tensorboard").Run(); err == nil {
			return py
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no Python with tensorboard: run scripts/test-setup.sh (or set MCPRL_PYTHON)")
	}
	t.Skip("no Python with tensorboard: run scripts/test-setup.sh (or set MCPRL_PYTHON)")
	return ""
}
