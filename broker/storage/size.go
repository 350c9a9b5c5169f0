package storage

import "golang.org/x/sys/unix"

// Size is the bytes of the log's record batches: its closed segments and the active segment
// (what DescribeLogDirs reports as a partition's size). It needs the log to be serving.
func (l *Log) Size() (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.servingLocked(); err != nil {
		return 0, err
	}
	n := l.activeIdx.size
	for _, s := range l.closed {
		n += s.size
	}
	return n, nil
}

// VolumeSpace is the size of the file system holding dir and the bytes an unprivileged
// writer may still use there (statfs: blocks and available blocks).
func VolumeSpace(dir string) (total, usable int64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, 0, storageErr("statfs", err)
	}
	bs := int64(st.Bsize) // int64 on linux, uint32 on darwin
	return int64(st.Blocks) * bs, int64(st.Bavail) * bs, nil
}
