// Package pgtest gives tests the DSN of the PostgreSQL server that
// scripts/test-setup.sh starts. Without MCPRL_TEST_POSTGRES a test skips
// locally and fails under CI=true, so no test is skipped in CI for want of
// the service.
package pgtest
