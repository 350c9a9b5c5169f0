package storage

import (
	"fmt"
	"sync"
)

// DefaultProducerIDBlockSize is how many producer ids one claim reserves (Apache's
// ProducerIdManager hands out blocks of 1000 too).
const DefaultProducerIDBlockSize = 1000

// producerIDsKeep is how many block entries the allocator's directory keeps; a claim wins if
// at most this many were created above it meanwhile (claimDir), so up to this many brokers
// can claim at the same instant without any of them having to retry.
const producerIDsKeep = 64

// maxBlockClaimAttempts bounds the retries when other brokers keep claiming the block we
// aimed at; each retry aims past the largest block seen, so this only trips on a broken
// directory.
const maxBlockClaimAttempts = 100

// ProducerIDs allocates the cluster's producer ids (InitProducerId) from the shared volume.
// Ids come in blocks: block n is ids [n·size, (n+1)·size), claimed by exclusively creating
// the entry n in the allocator's directory (the same claim as the Fence, so several brokers
// may allocate at once and no two ever get the same block) and made durable before any id in
// it is handed out. Ids are therefore unique across brokers and restarts; an id handed out
// is never handed out again, and a broker that restarts skips the rest of its block.
// ProducerIDs is safe for concurrent use.
type ProducerIDs struct {
	c    claimDir
	size int64

	mu   sync.Mutex
	next int64 // next id to hand out; guarded by mu
	end  int64 // end of the current block (exclusive); guarded by mu
}

// OpenProducerIDs opens (creating if needed) the allocator kept in dir (ProducerIDsDir).
// blockSize ≤ 0 means DefaultProducerIDBlockSize. Every broker of a cluster must use the
// same block size.
func OpenProducerIDs(fsys FS, dir string, blockSize int64) (*ProducerIDs, error) {
	if blockSize <= 0 {
		blockSize = DefaultProducerIDBlockSize
	}
	if err := fsys.MkdirAll(dir); err != nil {
		return nil, storageErr("open producer ids", err)
	}
	return &ProducerIDs{c: claimDir{fs: fsys, dir: dir, keep: producerIDsKeep}, size: blockSize}, nil
}

// Next returns a producer id no one has been given before.
func (p *ProducerIDs) Next() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next >= p.end {
		if err := p.claimBlockLocked(); err != nil {
			return 0, err
		}
	}
	id := p.next
	p.next++
	return id, nil
}

func (p *ProducerIDs) claimBlockLocked() error {
	for range maxBlockClaimAttempts {
		top, err := p.c.value()
		if err != nil {
			return storageErr("claim producer id block", err)
		}
		n := top + 1
		won, _, err := p.c.claim(n, producerIDsKeep)
		if err != nil {
			return storageErr("claim producer id block", err)
		}
		if won {
			p.next, p.end = n*p.size, (n+1)*p.size
			return nil
		}
	}
	return fmt.Errorf("claim producer id block in %s: lost %d races in a row", p.c.dir, maxBlockClaimAttempts)
}
