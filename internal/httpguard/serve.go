package httpguard

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Serve serves h on l until ctx ends or the server fails, with a limit on
// the time a client may take to send its request headers. When ctx ends
// it shuts the server down, letting requests in flight finish for up to
// grace, then closes what is left (logging that to logger, when not nil).
// It returns the server's failure, or nil when ctx ended it.
func Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration, logger *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		if logger != nil {
			logger.Warn("shutdown", "err", err)
		}
		srv.Close()
	}
	return nil
}
