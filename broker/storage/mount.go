package storage

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Mount is one line of /proc/self/mountinfo (proc(5)).
type Mount struct {
	ID         int
	Root       string // the directory of the file system mounted here
	MountPoint string
	FSType     string
	Source     string
	// Options holds the mount's options and the file system's (super) options, flags with
	// an empty value: "rw", "vers" → "4.1", "hard", "lookupcache" → "positive", ...
	Options map[string]string
}

// MountRefusal is one reason a data volume cannot keep the storage rules (docs/storage.md,
// "What the volume must provide").
type MountRefusal struct {
	Option string // the mount option or property at fault: "soft", "vers=4.0", "ro", ...
	Reason string // why the rules cannot hold with it
}

func (r MountRefusal) String() string { return r.Option + ": " + r.Reason }

// ParseMountInfo reads the lines of /proc/self/mountinfo. A line that does not have the
// format's fields is an error naming it (the kernel never writes one).
func ParseMountInfo(text string) ([]Mount, error) {
	var out []Mount
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMountLine(line)
		if err != nil {
			return nil, fmt.Errorf("mountinfo line %d %q: %w", i+1, line, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMountLine reads "ID parent major:minor root mountpoint options [optional...] - fstype
// source superoptions".
func parseMountLine(line string) (Mount, error) {
	fields := strings.Fields(line)
	sep := -1
	for i := 6; i < len(fields); i++ {
		if fields[i] == "-" {
			sep = i
			break
		}
	}
	if len(fields) < 7 || sep < 0 || len(fields) < sep+3 {
		return Mount{}, fmt.Errorf("want at least 6 fields, a \"-\", the type and the source")
	}
	id, err := strconv.Atoi(fields[0])
	if err != nil {
		return Mount{}, fmt.Errorf("mount id %q: %w", fields[0], err)
	}
	m := Mount{ID: id, Root: unescapeMount(fields[3]), MountPoint: unescapeMount(fields[4]), FSType: fields[sep+1], Source: unescapeMount(fields[sep+2]), Options: map[string]string{}}
	opts := fields[5]
	if len(fields) > sep+3 {
		opts += "," + fields[sep+3]
	}
	for _, o := range strings.Split(opts, ",") {
		if o == "" {
			continue
		}
		k, v, _ := strings.Cut(o, "=")
		m.Options[k] = v
	}
	return m, nil
}

// unescapeMount undoes mountinfo's octal escapes of space, tab, newline and backslash.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// MountFor is the mount holding path (absolute, symbolic links resolved): the one with the
// longest mount point containing it, the last listed when several are stacked on one point.
func MountFor(mounts []Mount, path string) (Mount, bool) {
	path = filepath.Clean(path)
	best, found := Mount{}, false
	for _, m := range mounts {
		if !within(path, m.MountPoint) {
			continue
		}
		if !found || len(m.MountPoint) >= len(best.MountPoint) {
			best, found = m, true
		}
	}
	return best, found
}

func within(path, dir string) bool {
	dir = filepath.Clean(dir)
	return path == dir || dir == "/" || strings.HasPrefix(path, dir+"/")
}

// objectStoreFUSE are FUSE file systems over object stores: no atomic exclusive create, link
// or rename.
var objectStoreFUSE = map[string]bool{
	"fuse.s3fs": true, "fuse.goofys": true, "fuse.gcsfuse": true, "fuse.mountpoint-s3": true,
	"fuse.rclone": true, "fuse.blobfuse": true, "fuse.blobfuse2": true,
}

// CheckMount says why a data volume mounted as m cannot keep the storage rules; nil when it
// can, as far as its mount shows (docs/storage.md, "What the volume must provide", has the
// rule each refusal protects; `paddock storage check` tests what a mount cannot show).
//
// Refused: a read-only mount; NFS older than 4.1 (no sessions: a retransmitted exclusive
// create, link or rename may be applied twice or answered wrongly, and the fence's claims
// are exactly such calls); `soft` or `softerr` (a call that times out reports an error though
// the server may still apply it, and reads may come back short — the broker's own I/O
// timeout bounds a hung call instead); `nocto` (claims, notices, journals and the previous
// leader's segments are all read by name after another node wrote them: that is close-to-open
// consistency); an object-store FUSE mount. Tolerated, because nothing rests on a listing or
// on "no such file": attribute caching (`ac`, `actimeo`, `acregmax`, `acdirmax`; `noac` is
// not needed) and `lookupcache=all` (the default: the fence asks the server through exclusive
// links, never through a cached "no such file").
func CheckMount(m Mount) []MountRefusal {
	var out []MountRefusal
	if _, ro := m.Options["ro"]; ro {
		out = append(out, MountRefusal{"ro", "the data volume is mounted read-only"})
	}
	switch {
	case m.FSType == "nfs" || m.FSType == "nfs4":
		out = append(out, checkNFS(m)...)
	case objectStoreFUSE[m.FSType]:
		out = append(out, MountRefusal{m.FSType, "an object store has no atomic exclusive create, link or rename"})
	}
	return out
}

func checkNFS(m Mount) []MountRefusal {
	var out []MountRefusal
	vers, ok := m.Options["vers"]
	if !ok {
		vers, ok = m.Options["nfsvers"]
	}
	switch {
	case !ok && m.FSType == "nfs":
		out = append(out, MountRefusal{"vers", "an nfs mount without vers= is NFSv3 or older; need vers=4.1 or later"})
	case !ok:
		out = append(out, MountRefusal{"vers", "the mount does not show its NFS version; need vers=4.1 or later"})
	case !nfsAtLeast41(vers):
		out = append(out, MountRefusal{"vers=" + vers, "NFS older than 4.1 has no sessions, so a retransmitted exclusive create, link or rename can be applied twice or answered wrongly; mount with vers=4.1 or later"})
	}
	for _, soft := range []string{"soft", "softerr"} {
		if _, ok := m.Options[soft]; ok {
			out = append(out, MountRefusal{soft, "a soft mount fails a call that times out although the server may still apply it, and can return short reads; mount hard (the broker bounds a hung call itself)"})
		}
	}
	if _, ok := m.Options["nocto"]; ok {
		out = append(out, MountRefusal{"nocto", "without close-to-open consistency a broker may read another node's stale copy of a claim, a journal or a segment; remove nocto"})
	}
	return out
}

// nfsAtLeast41 reads an NFS version ("3", "4", "4.0", "4.1", "4.2").
func nfsAtLeast41(vers string) bool {
	major, minor, _ := strings.Cut(vers, ".")
	ma, err := strconv.Atoi(major)
	if err != nil {
		return false
	}
	mi := 0
	if minor != "" {
		if mi, err = strconv.Atoi(minor); err != nil {
			return false
		}
	}
	return ma > 4 || (ma == 4 && mi >= 1)
}

// CheckDataDirMount finds the mount holding dataDir in mountinfo text and checks it.
func CheckDataDirMount(mountinfo, dataDir string) (Mount, []MountRefusal, error) {
	mounts, err := ParseMountInfo(mountinfo)
	if err != nil {
		return Mount{}, nil, err
	}
	m, ok := MountFor(mounts, dataDir)
	if !ok {
		return Mount{}, nil, fmt.Errorf("no mount holds %s", dataDir)
	}
	return m, CheckMount(m), nil
}

// ReadDataDirMount checks the mount holding dataDir in this process's /proc/self/mountinfo.
func ReadDataDirMount(dataDir string) (Mount, []MountRefusal, error) {
	dir, err := filepath.EvalSymlinks(dataDir)
	if err != nil {
		return Mount{}, nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return Mount{}, nil, err
	}
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, nil, fmt.Errorf("read the data volume's mount: %w", err)
	}
	return CheckDataDirMount(string(b), dir)
}
