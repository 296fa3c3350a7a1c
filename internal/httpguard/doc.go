// Package httpguard makes mcprl's HTTP servers safe by default: a listen
// address without a host means loopback, binding anywhere else is allowed
// with a warning, and an optional bearer token guards every request.
//
// Every command that serves HTTP (mcprl sandbox serve --http, the
// environment server) listens through Listen and wraps its handler with
// Bearer when given --token-env, and serves through Serve, which bounds the
// time a client may take to send its headers and shuts down gracefully.
package httpguard
