package storage

// Stats is what a log holds on the volume, for the broker's metrics: read under the log's
// lock, so the numbers agree with each other at one instant.
type Stats struct {
	Offsets
	// Segments counts the segment files: the closed ones and the active one.
	Segments int
	// Bytes is the record-batch bytes kept in them (what retention.bytes bounds), indexes
	// and snapshots not counted.
	Bytes int64
}

// Stats returns the log's offsets and size. Like Offsets it answers only while the log
// serves (ErrNotLeader before its takeover and after it stopped).
func (l *Log) Stats() (Stats, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.servingLocked(); err != nil {
		return Stats{}, err
	}
	s := Stats{Offsets: Offsets{LogStart: l.logStart, HighWatermark: l.hw, LogEnd: l.leo}, Segments: len(l.closed)}
	for _, seg := range l.closed {
		s.Bytes += seg.size
	}
	if l.activeIdx != nil {
		s.Segments++
		s.Bytes += l.activeIdx.size
	}
	return s, nil
}
