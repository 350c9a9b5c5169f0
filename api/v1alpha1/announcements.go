package v1alpha1

import (
	"fmt"
	"slices"
	"strings"
)

// readAnnouncement reads a comma-separated Lease announcement strictly, as the operator must
// read what a broker says about itself: at most limit entries, each read by one, none the
// same entry (by same) as an earlier one. The first entry that does not read is the error,
// and nothing is returned with it. "" is an empty list.
func readAnnouncement[T any](s string, limit int, one func(string) (T, error), same func(a, b T) bool, name func(T) string) ([]T, error) {
	if s == "" {
		return []T{}, nil
	}
	entries := strings.Split(s, ",")
	if len(entries) > limit {
		return nil, fmt.Errorf("%d entries, more than %d", len(entries), limit)
	}
	out := make([]T, 0, len(entries))
	for _, e := range entries {
		v, err := one(e)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(out, func(w T) bool { return same(v, w) }) {
			return nil, fmt.Errorf("%s listed twice", name(v))
		}
		out = append(out, v)
	}
	return out, nil
}
