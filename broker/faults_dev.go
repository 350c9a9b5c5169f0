package broker

import (
	"context"
	"os"
	"time"

	"github.com/go-logr/logr"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Storage fault injection for paddock dev (docs/testing.md, "Storage faults in paddock dev"):
// when PADDOCK_DEV_STORAGE_FAULTS names a file, the broker's partition storage goes through a
// storage.Faults plan read from that file (storage.ParseFaultRules's syntax) and re-read
// every faultsPollInterval, so a test — or a person — can make one partition's files fail
// with EIO on one broker, then heal them, while everything runs. paddock dev's node agent
// sets the variable for the pods it runs; a cluster never does, and a broker that finds it set
// logs so at start.

// envStorageFaults names the fault plan file.
const envStorageFaults = "PADDOCK_DEV_STORAGE_FAULTS"

// faultsPollInterval is how often the plan file is re-read.
const faultsPollInterval = 250 * time.Millisecond

// devStorageFaults returns the fault-injecting FS over inner and the goroutine that keeps its
// plan in step with the file, or inner and nil when the variable is not set.
func devStorageFaults(inner storage.FS, log logr.Logger) (storage.FS, func(context.Context)) {
	path := os.Getenv(envStorageFaults)
	if path == "" {
		return inner, nil
	}
	log.Info("Storage faults can be injected from a file (paddock dev)", "file", path)
	faults := storage.NewFaults()
	return faults.FS(inner), func(ctx context.Context) { followFaultPlan(ctx, path, faults, log) }
}

// followFaultPlan applies the plan in path whenever its content changes, until ctx ends. A
// missing file is the empty plan; a plan that does not parse is logged and the last one kept.
func followFaultPlan(ctx context.Context, path string, faults *storage.Faults, log logr.Logger) {
	applied := ""
	for {
		b, err := os.ReadFile(path)
		if err != nil && !os.IsNotExist(err) {
			log.Error(err, "Storage fault plan not read; the last one stays", "file", path)
		}
		if plan := string(b); err == nil || os.IsNotExist(err) {
			if plan != applied {
				if rules, perr := storage.ParseFaultRules(plan); perr != nil {
					log.Error(perr, "Storage fault plan refused; the last one stays", "file", path)
				} else {
					faults.Set(rules...)
					log.Info("Storage fault plan applied", "plan", plan)
				}
				applied = plan
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(faultsPollInterval):
		}
	}
}
