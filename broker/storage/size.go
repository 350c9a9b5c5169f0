package storage

import "golang.org/x/sys/unix"

// Size is the bytes of the log's record batches: its closed segments and the active segment
// (what DescribeLogDirs reports as a partition's size). It needs the log to be serving.
func (l *Log) Size() (int64, error) {
	s, err := l.Stats()
	return s.Bytes, err
}

// Space is what statfs says of the file system holding a directory.
type Space struct {
	Total  int64 // its size
	Usable int64 // bytes an unprivileged writer may still use (available blocks)
	Used   int64 // size minus free blocks
}

// VolumeSpace is the size of the file system holding dir, the bytes an unprivileged writer
// may still use there, and the bytes in use (statfs).
func VolumeSpace(dir string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return Space{}, storageErr("statfs", err)
	}
	bs := int64(st.Bsize) // int64 on linux, uint32 on darwin
	return Space{Total: int64(st.Blocks) * bs, Usable: int64(st.Bavail) * bs, Used: int64(st.Blocks-st.Bfree) * bs}, nil
}
