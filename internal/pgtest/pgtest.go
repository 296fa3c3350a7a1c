package pgtest

import (
	"os"
	"testing"
)

// EnvVar names the variable holding the test server's DSN.
const EnvVar = "MCPRL_TEST_POSTGRES"

// DSN returns the test server's DSN, or ends the test when there is none.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(EnvVar)
	if dsn != "" {
		return dsn
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not set: run scripts/test-setup.sh and source .ci/env", EnvVar)
	}
	t.Skipf("%s is not set (run scripts/test-setup.sh and source .ci/env)", EnvVar)
	return ""
}
