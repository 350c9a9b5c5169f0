package storage

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
)

// Faults is a fault plan that can be changed while the file system is in use: wrap an FS with
// Faults.FS and Set rules at any time — EIO on one partition's files, ENOSPC on every write,
// a hang on every fsync — then Clear them. It exists for tests and for fault injection in
// paddock dev; production uses OSFS. Faults is safe for concurrent use.
type Faults struct {
	mu    sync.Mutex
	rules []FaultRule   // guarded by mu
	gen   chan struct{} // closed when the plan changes, releasing calls hanging on it; guarded by mu
	hits  atomic.Int64
}

// FaultRule fails or hangs the calls it matches.
type FaultRule struct {
	// PathContains selects the files whose path contains it (a partition's directory, say
	// "topics/orders-AQID/0/", or a suffix such as ".log"); "" selects every file.
	PathContains string
	// Ops are the operations it applies to; none means every operation.
	Ops []Op
	// Err is what the call fails with (syscall.EIO, syscall.ENOSPC, ...), unless Hang.
	Err error
	// Hang blocks the call until the plan changes, as a hard-mounted network file system
	// blocks while its server is unreachable (the log's IOTimeout bounds the wait).
	Hang bool
}

func (r FaultRule) matches(op Op, path string) bool {
	return strings.Contains(path, r.PathContains) && (len(r.Ops) == 0 || slices.Contains(r.Ops, op))
}

// String is the rule in ParseFaultRules's syntax.
func (r FaultRule) String() string {
	action := "hang"
	switch {
	case r.Hang:
	case r.Err == syscall.EIO:
		action = "eio"
	case r.Err == syscall.ENOSPC:
		action = "enospc"
	default:
		action = fmt.Sprintf("error(%v)", r.Err)
	}
	var ops []string
	for _, op := range r.Ops {
		ops = append(ops, string(op))
	}
	if len(ops) > 0 {
		action += ":" + strings.Join(ops, "+")
	}
	return action + "@" + r.PathContains
}

// NewFaults returns an empty plan: nothing is injected until Set.
func NewFaults() *Faults { return &Faults{gen: make(chan struct{})} }

// FS wraps inner so that every call consults the plan.
func (f *Faults) FS(inner FS) FS { return FaultFS{FS: inner, Fault: f.Fault} }

// Set replaces the plan with rules. Calls hanging on the old plan are released and look at
// the new one.
func (f *Faults) Set(rules ...FaultRule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = slices.Clone(rules)
	close(f.gen)
	f.gen = make(chan struct{})
}

// Clear removes every rule.
func (f *Faults) Clear() { f.Set() }

// Rules is the plan now.
func (f *Faults) Rules() []FaultRule {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rules)
}

// Hits is how many calls the plan has failed or held so far.
func (f *Faults) Hits() int64 { return f.hits.Load() }

// Fault is FaultFS's Fault function: the first matching rule decides.
func (f *Faults) Fault(op Op, path string) error {
	for {
		f.mu.Lock()
		i := slices.IndexFunc(f.rules, func(r FaultRule) bool { return r.matches(op, path) })
		if i < 0 {
			f.mu.Unlock()
			return nil
		}
		r, gen := f.rules[i], f.gen
		f.mu.Unlock()
		f.hits.Add(1)
		if !r.Hang {
			return r.Err
		}
		<-gen
	}
}

// ParseFaultRules reads a plan written as rules separated by commas, each
// "<action>[:<op>+<op>...]@<path substring>" with action eio, enospc or hang and ops among
// open, read, write, sync, truncate, readdir, mkdir, rename, link, remove, syncdir. For
// example "eio@topics/orders-AQID/0/" fails every call on that partition's files, and
// "hang:sync@" holds every fsync. An empty string is the empty plan.
func ParseFaultRules(spec string) ([]FaultRule, error) {
	var rules []FaultRule
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		head, path, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("fault rule %q: want <action>[:<ops>]@<path substring>", part)
		}
		action, ops, _ := strings.Cut(head, ":")
		r := FaultRule{PathContains: path}
		switch action {
		case "eio":
			r.Err = syscall.EIO
		case "enospc":
			r.Err = syscall.ENOSPC
		case "hang":
			r.Hang = true
		default:
			return nil, fmt.Errorf("fault rule %q: unknown action %q (eio, enospc or hang)", part, action)
		}
		for _, op := range strings.Split(ops, "+") {
			if op == "" {
				continue
			}
			if !slices.Contains(allOps, Op(op)) {
				return nil, fmt.Errorf("fault rule %q: unknown operation %q", part, op)
			}
			r.Ops = append(r.Ops, Op(op))
		}
		rules = append(rules, r)
	}
	return rules, nil
}

var allOps = []Op{OpOpen, OpRead, OpWrite, OpSync, OpTruncate, OpReadDir, OpMkdir, OpRename, OpLink, OpRemove, OpSyncDir}
