package groups

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// A group's files live in one directory under the groups root (docs/groups.md "Files"):
//
//	<root>/<dir name>/fence/               the group's storage.Fence (its claims, never removed)
//	<root>/<dir name>/<epoch:010>.log      one offsets file per claimed coordinator epoch
//	<root>/<dir name>/<epoch:010>.log.tmp  a compaction of that file in progress
//
// The directory name must be a valid file name for any group id (Kafka allows any string,
// "" included), injective, and readable for the usual ids. So: "g-" followed by the id with
// every byte outside [A-Za-z0-9._-] written as %XX; an id whose escaped form would be longer
// than maxEscapedName is "h-" followed by a SHA-256 prefix instead, and its real id is read
// from the snapshot inside its newest file (which the loader checks anyway).
const (
	fenceDirName   = "fence"
	logSuffix      = ".log"
	tmpSuffix      = ".tmp" // after a log name: its owner's compaction in progress
	epochDigits    = 10
	maxEscapedName = 200
	hashedNameLen  = 32 // hex digits of SHA-256 kept
)

// dirName is the directory name of group id.
func dirName(id string) string {
	var b strings.Builder
	b.WriteString("g-")
	for i := 0; i < len(id); i++ {
		c := id[i]
		if isPlainNameByte(c) {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
		if b.Len() > maxEscapedName+2 {
			sum := sha256.Sum256([]byte(id))
			return "h-" + hex.EncodeToString(sum[:])[:hashedNameLen]
		}
	}
	return b.String()
}

func isPlainNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// parseDirName inverts dirName. For a hashed name it reports hashed=true and no id: the id
// must be read from the group's files. Names dirName never produces are rejected.
func parseDirName(name string) (id string, hashed, ok bool) {
	if rest, found := strings.CutPrefix(name, "h-"); found {
		if len(rest) != hashedNameLen {
			return "", false, false
		}
		if _, err := hex.DecodeString(rest); err != nil {
			return "", false, false
		}
		return "", true, true
	}
	rest, found := strings.CutPrefix(name, "g-")
	if !found {
		return "", false, false
	}
	var b strings.Builder
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		switch {
		case isPlainNameByte(c):
			b.WriteByte(c)
		case c == '%' && i+2 < len(rest):
			v, err := strconv.ParseUint(rest[i+1:i+3], 16, 8)
			if err != nil || isPlainNameByte(byte(v)) || strings.ToUpper(rest[i+1:i+3]) != rest[i+1:i+3] {
				return "", false, false // not canonical: dirName would not write it
			}
			b.WriteByte(byte(v))
			i += 2
		default:
			return "", false, false
		}
	}
	id = b.String()
	if dirName(id) != name {
		return "", false, false
	}
	return id, false, true
}

// logName is the offsets file written by the coordinator that claimed epoch.
func logName(epoch int32) string {
	return fmt.Sprintf("%0*d%s", epochDigits, epoch, logSuffix)
}

// parseLogName inverts logName; other names (temporaries, litter) are rejected.
func parseLogName(name string) (int32, bool) {
	s, found := strings.CutSuffix(name, logSuffix)
	if !found || len(s) != epochDigits {
		return 0, false
	}
	v, err := strconv.ParseUint(s, 10, 31)
	if err != nil {
		return 0, false
	}
	return int32(v), true
}

// parseTmpName reads the epoch of a compaction's temporary ("<log name>.tmp").
func parseTmpName(name string) (int32, bool) {
	s, found := strings.CutSuffix(name, tmpSuffix)
	if !found {
		return 0, false
	}
	return parseLogName(s)
}
