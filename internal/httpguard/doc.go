// Package httpguard makes mcprl's HTTP servers safe by default: a listen
// address without a host means loopback (a host without a port is an
// error), binding anywhere else is allowed with a warning, and an optional
// bearer token guards every request but the open paths named (a liveness
// probe's /health).
//
// Every command that serves HTTP (mcprl sandbox serve --http, the
// environment server) listens through Listen and wraps its handler with
// Bearer when given --token-env, and serves through Serve, which bounds the
// time a client may take to send its headers and its body and the time a
// kept-alive connection may idle, and shuts down gracefully. SameOrigin
// refuses cross-site requests and, on loopback, foreign Host headers (DNS
// rebinding); LimitListener caps the connections open at once.
package httpguard
