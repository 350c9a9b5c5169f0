package scram

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Stored is one user's SCRAM credentials, one per mechanism at most: what the operator writes
// for a user in the cluster's credentials Secret and the brokers read back
// (docs/security.md, "Secrets and who reads them").
type Stored map[string]Credential // by Mechanism.Name

// Encode is the text form of s: one line per mechanism, sorted,
// "SCRAM-SHA-512 iterations=4096 salt=<b64> stored=<b64> server=<b64>".
func (s Stored) Encode() []byte {
	names := make([]string, 0, len(s))
	for name := range s {
		names = append(names, name)
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		c := s[name]
		fmt.Fprintf(&b, "%s iterations=%d salt=%s stored=%s server=%s\n", name, c.Iterations,
			base64.StdEncoding.EncodeToString(c.Salt), base64.StdEncoding.EncodeToString(c.StoredKey),
			base64.StdEncoding.EncodeToString(c.ServerKey))
	}
	return []byte(b.String())
}

// Decode reads what Encode wrote. A line for an unknown mechanism, or a credential whose keys
// do not fit its mechanism, is an error: a broker then treats the user as unknown rather than
// half-known.
func Decode(text []byte) (Stored, error) {
	out := Stored{}
	for i, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		if line == "" {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 5 {
			return nil, fmt.Errorf("scram: line %d: want mechanism iterations salt stored server", i+1)
		}
		m, ok := MechanismNamed(fields[0])
		if !ok {
			return nil, fmt.Errorf("scram: line %d: unknown mechanism", i+1)
		}
		var c Credential
		var err error
		vals := map[string]string{}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return nil, fmt.Errorf("scram: line %d: field without '='", i+1)
			}
			vals[k] = v
		}
		if c.Iterations, err = strconv.Atoi(vals["iterations"]); err != nil || c.Iterations < MinIterations || c.Iterations > MaxIterations {
			return nil, fmt.Errorf("scram: line %d: %w", i+1, ErrBadIterations)
		}
		for k, dst := range map[string]*[]byte{"salt": &c.Salt, "stored": &c.StoredKey, "server": &c.ServerKey} {
			if *dst, err = base64.StdEncoding.DecodeString(vals[k]); err != nil {
				return nil, fmt.Errorf("scram: line %d: %s is not base64", i+1, k)
			}
		}
		size := m.hash().Size()
		if len(c.Salt) == 0 || len(c.StoredKey) != size || len(c.ServerKey) != size {
			return nil, fmt.Errorf("scram: line %d: key sizes do not fit %s", i+1, m.Name)
		}
		if _, dup := out[m.Name]; dup {
			return nil, fmt.Errorf("scram: line %d: %s twice", i+1, m.Name)
		}
		out[m.Name] = c
	}
	return out, nil
}
