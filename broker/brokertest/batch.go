package brokertest

import "github.com/paddock-dev/paddock/broker/internal/recordbatch"

// Batch describes a record batch v2 as a producer would send it, for raw Produce requests;
// Bytes encodes it (recordbatch.Batch).
type Batch = recordbatch.Batch

// Plain returns a batch of values from a producer without idempotence, stamped now.
func Plain(values ...[]byte) Batch { return recordbatch.Plain(values...) }
