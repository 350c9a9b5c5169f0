//go:build !linux

package storage

import "time"

func monotonicNow() int64 { return time.Now().UnixNano() }
