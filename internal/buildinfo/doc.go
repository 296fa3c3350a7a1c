// Package buildinfo describes the running binary's build for --version:
// its module version, the commit it was built from and the Go toolchain.
package buildinfo
