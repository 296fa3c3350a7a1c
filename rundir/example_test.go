package rundir_test

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/mcprl/mcprl/rundir"
)

func Example() {
	dir := filepath.Join(os.TempDir(), "rundir-example")
	defer os.RemoveAll(dir)
	lock, err := rundir.Acquire(dir)
	if err != nil {
		fmt.Println(err) // "output dir ... is in use by pid N on host H since ..."
		return
	}
	defer lock.Release()
	prev, _ := rundir.Previous(dir)
	fmt.Println(len(prev), "outputs of an earlier run")
	// Output: 0 outputs of an earlier run
}
