package httpguard_test

import (
	"fmt"
	"net/http"
	"os"

	"github.com/mcprl/mcprl/internal/httpguard"
)

func Example() {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprintln(w, "hello") })
	// --http :8080 listens on 127.0.0.1:8080; --token-env MCPRL_TOKEN guards it.
	l, err := httpguard.Listen(":0", true, os.Stderr)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer l.Close()
	srv := &http.Server{Handler: httpguard.Bearer("token-from-env", h)}
	_ = srv // srv.Serve(l) until shutdown
	fmt.Println(httpguard.LoopbackDefault(":8080"))
	// Output: 127.0.0.1:8080
}
