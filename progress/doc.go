// Package progress prints how far a run is: on a terminal, one live bar redrawn in place (step, share
// done, the latest values, seconds per step and the time left); anywhere else (a log file, a pipe), one
// plain line per logging step, so that a log holds a readable history.
//
// Speed and time left are measured over the steps this process ran: a run resumed at step 30 of 40
// does not count the 30 steps it loaded as done in no time.
package progress
