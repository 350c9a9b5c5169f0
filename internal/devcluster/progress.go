package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// step is one phase of bringing something up: run does it, done says what holds afterwards
// (a line a person reads).
type step struct {
	done string
	run  func(context.Context) error
}

// progress prints each step as it ends: the time since the start, the step's own time, and
// what now holds. A nil *progress is silent (the tests' environments).
type progress struct {
	w     io.Writer
	start time.Time
}

// run runs steps in order and stops at the first error.
func (p *progress) run(ctx context.Context, steps ...step) error {
	for _, s := range steps {
		began := time.Now()
		if err := s.run(ctx); err != nil {
			return err
		}
		p.print(time.Since(began), s.done)
	}
	return nil
}

func (p *progress) print(took time.Duration, what string) {
	if p == nil || p.w == nil {
		return
	}
	fmt.Fprintf(p.w, "  %6.1fs  %+6.1fs  %s\n", p.elapsed().Seconds(), took.Seconds(), what)
}

// elapsed is the time since the start.
func (p *progress) elapsed() time.Duration { return time.Since(p.start) }

// sinceEnv carries the moment the person's command started (`make dev` sets it as it starts,
// before it builds anything; else paddock dev's first process), as Unix nanoseconds, to every
// process of the environment: the time to the first record consumed is counted from there.
const sinceEnv = "PADDOCK_DEV_SINCE"

// commandStart is when the person's command started: $PADDOCK_DEV_SINCE, or now.
func commandStart() time.Time {
	if ns, err := strconv.ParseInt(os.Getenv(sinceEnv), 10, 64); err == nil && ns > 0 {
		return time.Unix(0, ns)
	}
	return time.Now()
}

// markCommandStart sets $PADDOCK_DEV_SINCE for the processes this one starts, unless the
// command that started this one has set it.
func markCommandStart() {
	if os.Getenv(sinceEnv) == "" {
		_ = os.Setenv(sinceEnv, strconv.FormatInt(time.Now().UnixNano(), 10)) // cannot fail for a valid name
	}
}
