package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// crew shares small products with helper goroutines that spin between ops instead of sleeping. A decoding step
// runs dozens of products of 10-40 µs one after another; handing half of one to a goroutine that sleeps costs
// as much as the product (the runtime wakes an OS thread), while a helper that is already polling picks it up
// within a microsecond. A helper polls (yielding to any other goroutine between polls) until it has had no work
// for crewSpin, then sleeps until the next job.
//
// Work is claimed unit by unit by whoever gets there first, the caller included, and the caller waits only for
// the units a helper has claimed and not finished: a job that no helper sees in time runs on the caller alone,
// as it would without the crew. Each unit runs exactly once, so results do not depend on who ran it.
//
// Spinning pays only while the helpers have cores of their own. Where they do not (other processes keep the
// cores busy), a spinning helper takes its time from the caller's thread and runs nothing itself. The crew
// therefore counts the units its helpers ran over each crewWindow jobs, and when they ran less than a fifth,
// it stands down for a while (100 ms, doubling up to 2 s while it keeps failing): run then reports false and
// the caller runs the work its usual way, and the helpers go to sleep.
type crew struct {
	job     atomic.Pointer[crewJob]
	helpers []*crewHelper
	done    chan struct{} // closed by stop

	mu                 sync.Mutex
	jobs, units, ran   int           // this window's jobs, their units, and the units helpers ran
	pause              time.Duration // the next stand-down
	until              time.Time     // standing down until then
	standDowns, probes atomic.Int64  // counted for tests and reports
	allUnits, helped   atomic.Int64  // every unit run, and those helpers ran
}

const (
	crewWindow   = 64
	crewPauseMin = 100 * time.Millisecond
	crewPauseMax = 2 * time.Second
)

// crewSpin is how long a helper keeps polling after its last job: longer than the gaps between a decoding step's
// products (the elementwise ops between them, the sampler between steps), short enough that an idle process
// stops burning the core within a millisecond.
const crewSpin = 500 * time.Microsecond

type crewHelper struct {
	parked atomic.Bool
	wake   chan struct{}
}

// crewJob is one call's units: run(lo, hi) for unit ranges claimed one unit at a time.
type crewJob struct {
	fn    func(lo, hi int)
	units int32
	next  atomic.Int32 // the next unit to claim
	left  atomic.Int32 // units claimed by no one or not yet finished
}

// work claims and runs units until none are left, and returns how many it ran.
func (j *crewJob) work() int {
	ran := 0
	for {
		u := j.next.Add(1) - 1
		if u >= j.units {
			return ran
		}
		j.fn(int(u), int(u)+1)
		j.left.Add(-1)
		ran++
	}
}

var (
	crewOnce sync.Once
	theCrew  *crew
)

// sharedCrew returns the process's crew: GOMAXPROCS-1 helpers (at most 7), started on first use; nil where
// GOMAXPROCS is 1. The helpers live as long as the process, sleeping when there is no work.
func sharedCrew() *crew {
	crewOnce.Do(func() {
		if n := min(runtime.GOMAXPROCS(0)-1, 7); n >= 1 {
			theCrew = newCrew(n)
		}
	})
	return theCrew
}

// activeCrew is the crew small products are shared with (Lib.crew), nil when off or without OpenBLAS.
func activeCrew() *crew {
	if openblas == nil {
		return nil
	}
	return openblas.crew()
}

// hot reports whether a helper is awake (polling or working).
func (c *crew) hot() bool {
	for _, h := range c.helpers {
		if !h.parked.Load() {
			return true
		}
	}
	return false
}

// newCrew starts a crew of n helpers.
func newCrew(n int) *crew {
	c := &crew{done: make(chan struct{})}
	for range n {
		h := &crewHelper{wake: make(chan struct{}, 1)}
		c.helpers = append(c.helpers, h)
		go c.loop(h)
	}
	return c
}

// stop ends the helpers (tests; the process's crew lives as long as the process).
func (c *crew) stop() { close(c.done) }

// run calls fn(u, u+1) for every unit u in [0, units), on the caller and whichever helpers join in, and returns
// when all are done; it reports false, running nothing, while the crew stands down.
func (c *crew) run(units int, fn func(lo, hi int)) bool {
	c.mu.Lock()
	if !c.until.IsZero() {
		if time.Now().Before(c.until) {
			c.mu.Unlock()
			return false
		}
		c.until = time.Time{}
		c.probes.Add(1)
	}
	c.mu.Unlock()
	j := &crewJob{fn: fn, units: int32(units)}
	j.left.Store(int32(units))
	c.job.Store(j)
	for _, h := range c.helpers {
		if h.parked.Load() {
			select {
			case h.wake <- struct{}{}:
			default:
			}
		}
	}
	mine := j.work()
	for spins := 0; j.left.Load() > 0; spins++ {
		if spins%64 == 63 {
			runtime.Gosched()
		}
	}
	c.job.CompareAndSwap(j, nil)
	c.account(units, units-mine)
	c.allUnits.Add(int64(units))
	c.helped.Add(int64(units - mine))
	return true
}

// account adds a job's units and those its helpers ran to the window, and at the window's end stands the crew
// down if the helpers ran less than a fifth.
func (c *crew) account(units, helped int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.jobs, c.units, c.ran = c.jobs+1, c.units+units, c.ran+helped
	if c.jobs < crewWindow {
		return
	}
	if 5*c.ran < c.units {
		c.pause = min(max(2*c.pause, crewPauseMin), crewPauseMax)
		c.until = time.Now().Add(c.pause)
		c.standDowns.Add(1)
	} else {
		c.pause = 0
	}
	c.jobs, c.units, c.ran = 0, 0, 0
}

// loop is a helper: it runs every job it sees, polls while jobs keep coming, and sleeps after crewSpin without
// one. A job is posted before the poster reads parked, and parked is set before the helper looks for a job
// once more, so a job posted while the helper goes to sleep either is seen or wakes it.
func (c *crew) loop(h *crewHelper) {
	var seen *crewJob
	idle := time.Now()
	for spins := 0; ; spins++ {
		if j := c.job.Load(); j != nil && j != seen {
			seen = j
			if j.work() > 0 {
				idle = time.Now()
			}
			continue
		}
		if spins%64 != 63 {
			continue
		}
		select {
		case <-c.done:
			return
		default:
		}
		if time.Since(idle) < crewSpin {
			runtime.Gosched()
			continue
		}
		h.parked.Store(true)
		if j := c.job.Load(); j == nil || j == seen {
			select {
			case <-h.wake:
			case <-c.done:
				return
			}
		}
		h.parked.Store(false)
		idle = time.Now()
	}
}
