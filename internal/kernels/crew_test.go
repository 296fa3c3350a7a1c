package kernels

import (
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCrewRunsEveryUnitOnce: jobs posted by several goroutines at once, each of any number of units, run every
// unit exactly once, whether a helper joins or not.
func TestCrewRunsEveryUnitOnce(t *testing.T) {
	c := newCrew(2)
	defer c.stop()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 200 {
				units := 1 + (g*7+round)%19
				counts := make([]atomic.Int32, units)
				if !c.run(units, func(lo, hi int) {
					for u := lo; u < hi; u++ {
						counts[u].Add(1)
						for i := 0; i < 2000*(u%3); i++ { // uneven units
							_ = i
						}
					}
				}) {
					continue // standing down: the caller runs the work its usual way
				}
				for u := range counts {
					if n := counts[u].Load(); n != 1 {
						t.Errorf("goroutine %d round %d: unit %d of %d ran %d times", g, round, u, units, n)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// TestCrewStandsDown: a window of jobs in which the helpers ran less than a fifth of the units stands the crew
// down (run refuses work, the pause doubling while it keeps failing); once the pause is over it probes again,
// and a window in which they ran their share resets the pause.
func TestCrewStandsDown(t *testing.T) {
	c := newCrew(1)
	defer c.stop()
	fail := func() {
		for range crewWindow {
			c.account(10, 1)
		}
	}
	fail()
	if c.standDowns.Load() != 1 || c.pause != crewPauseMin {
		t.Fatalf("after a failed window: %d stand-downs, pause %v", c.standDowns.Load(), c.pause)
	}
	if c.run(4, func(int, int) { t.Error("ran while standing down") }) {
		t.Fatal("run accepted work while standing down")
	}
	c.mu.Lock()
	c.until = time.Now().Add(-time.Millisecond) // the pause is over
	c.mu.Unlock()
	ran := 0
	if !c.run(4, func(lo, hi int) { ran += hi - lo }) || ran != 4 || c.probes.Load() != 1 {
		t.Fatalf("after the pause: ran %d units, %d probes", ran, c.probes.Load())
	}
	c.mu.Lock()
	c.jobs, c.units, c.ran = 0, 0, 0
	c.mu.Unlock()
	fail()
	if c.pause != 2*crewPauseMin {
		t.Errorf("second failed window: pause %v, want %v", c.pause, 2*crewPauseMin)
	}
	for range 10 {
		fail()
	}
	if c.pause != crewPauseMax {
		t.Errorf("pause %v after many failures, want the cap %v", c.pause, crewPauseMax)
	}
	for range crewWindow {
		c.account(10, 5)
	}
	if c.pause != 0 {
		t.Errorf("pause %v after a window the helpers shared, want 0", c.pause)
	}
}

// TestSmallDotsCrew: decoding's products give the same bits shared with the crew as on one core.
func TestSmallDotsCrew(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	lib, err := OpenBLAS()
	if err != nil {
		t.Skip(err)
	}
	was := !lib.noCrew.Load()
	defer lib.SetCrew(was)
	if !lib.SetCrew(true) {
		t.Skip("GOMAXPROCS 1: no helpers")
	}
	for _, s := range []struct {
		batch, m, n, k int
		bCrossFirst    bool
	}{{1, 8, 704, 256, true}, {1, 8, 256, 704, true}, {1, 7, 2048, 256, true}, {16, 2, 192, 64, true}, {16, 2, 64, 192, false}, {1, 3, 131, 64, true}} {
		a, b := fillSin(s.batch*s.m*s.k, 1), fillSin(s.batch*s.n*s.k, 2)
		one := make([]float32, s.batch*s.m*s.n)
		lib.SetCrew(false)
		lib.smallDots(s.batch, s.m, s.n, s.k, a, b, s.bCrossFirst, one)
		lib.SetCrew(true)
		calls := lib.CrewCalls()
		shared := make([]float32, len(one))
		lib.smallDots(s.batch, s.m, s.n, s.k, a, b, s.bCrossFirst, shared)
		if !slices.Equal(one, shared) {
			t.Errorf("%+v: products differ with the crew", s)
		}
		t.Logf("%+v: shared with the crew: %v", s, lib.CrewCalls() > calls)
	}
}

// TestCrewHelperJoins: a job's two units run at the same time, one on the caller and one on a helper: each unit
// waits until the other has started. The helper is asleep when the job is posted (woken by run) and spinning
// for the second job.
func TestCrewHelperJoins(t *testing.T) {
	c := newCrew(1)
	defer c.stop()
	for round := range 2 {
		if round == 0 {
			time.Sleep(2 * crewSpin) // the helper has gone to sleep
		}
		var started [2]atomic.Bool
		var alone atomic.Bool
		c.run(2, func(lo, _ int) {
			started[lo].Store(true)
			deadline := time.Now().Add(5 * time.Second)
			for !started[1-lo].Load() {
				if time.Now().After(deadline) {
					alone.Store(true)
					return
				}
			}
		})
		if alone.Load() {
			t.Fatalf("round %d: no helper ran the job's other unit within 5 s", round)
		}
	}
}
