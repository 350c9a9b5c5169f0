package groups

import (
	"k8s.io/utils/clock"

	"github.com/paddock-dev/paddock/broker/storage"
)

// Unavailable returns a Coordinator that coordinates no group and never will: every API
// method answers as a Coordinator does before its first SetView — COORDINATOR_NOT_AVAILABLE
// wherever the response has a place for it, after the checks that come first (an invalid
// group id, an unknown topic's partitions, a version that is not served). It is the
// coordinator of a broker that cannot run one yet (no data directory, or no cluster id to
// name the groups' directory). topics validates commits, as Config.Topics does. It holds no
// files and runs no goroutine; SetView is ignored and Close does nothing.
func Unavailable(topics Topics) *Coordinator {
	cfg := DefaultConfig()
	cfg.Topics = topics
	return &Coordinator{
		cfg:     cfg,
		fs:      storage.OSFS{},
		clock:   clock.RealClock{},
		loadSem: make(chan struct{}, cfg.LoadConcurrency),
		kick:    make(chan struct{}, 1),
		quit:    make(chan struct{}),
		closed:  true, // refuses SetView: it never serves
		epoch:   -1,
		groups:  map[string]*group{},
		claimed: map[string]claim{},
		fenced:  map[string]int32{},
	}
}
