package interop

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// kcatConsumeFormat prints each record as a text line "partition offset keylen valuelen
// headers" followed by the raw key and value bytes, so binary values come back byte-exact.
const kcatConsumeFormat = "%p %o %K %S %h\n%k%s"

func TestKcatProduceAndConsume(t *testing.T) {
	if _, err := exec.LookPath("kcat"); err != nil {
		t.Fatal("kcat is not installed: run `make kcat` (hack/install-kcat.sh)")
	}
	const topic = "kcat"
	addrs := newCluster(t)
	createTopic(t, addrs, topic, 2)
	ctx := testCtx(t)
	producer := []string{"-P", "-b", addrs[0], "-t", topic, "-X", "enable.idempotence=true", "-X", "acks=all"}

	// Line mode: "key<TAB>value" lines, partitioned by librdkafka's default partitioner, with
	// the same two headers on every record (-H applies to all).
	rng := rand.New(rand.NewPCG(1, 2))
	var wrote []record
	var lines bytes.Buffer
	for i := range 40 {
		v := make([]byte, rng.IntN(300))
		for j := range v {
			v[j] = byte(' ' + rng.IntN(95)) // printable ASCII: no tab, no newline
		}
		r := record{Partition: -1, Offset: -1, Key: fmt.Appendf(nil, "line-%d", i), Value: v,
			Headers: []header{{"source", "kcat"}, {"mode", "lines"}}}
		wrote = append(wrote, r)
		fmt.Fprintf(&lines, "%s\t%s\n", r.Key, r.Value)
	}
	cmd := exec.CommandContext(ctx, "kcat", append(producer, "-K", "\t", "-H", "source=kcat", "-H", "mode=lines")...)
	cmd.Stdin = &lines
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P (lines): %v\n%s", err, out)
	}

	// File mode: each file is one record, its bytes exactly (every byte value), to partition 1.
	dir := t.TempDir()
	for i := range 4 {
		v := make([]byte, 1+rng.IntN(64<<10))
		for j := range v {
			v[j] = byte(rng.Uint32())
		}
		path := filepath.Join(dir, strconv.Itoa(i))
		if err := os.WriteFile(path, v, 0o600); err != nil {
			t.Fatal(err)
		}
		r := record{Partition: 1, Offset: -1, Key: fmt.Appendf(nil, "file-%d", i), Value: v, Headers: []header{{"file", strconv.Itoa(i)}}}
		wrote = append(wrote, r)
		args := append(producer, "-p", "1", "-k", string(r.Key), "-H", "file="+strconv.Itoa(i), path)
		if out, err := exec.CommandContext(ctx, "kcat", args...).CombinedOutput(); err != nil {
			t.Fatalf("kcat -P (file %d): %v\n%s", i, err, out)
		}
	}

	// Every partition from the beginning to its end (-e), no group.
	var stderr bytes.Buffer
	cmd = exec.CommandContext(ctx, "kcat", "-C", "-b", addrs[1], "-t", topic, "-o", "beginning", "-e", "-q", "-f", kcatConsumeFormat)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.Bytes())
	}
	read, err := parseKcat(out)
	if err != nil {
		t.Fatalf("kcat -C output: %v", err)
	}
	checkReadBack(t, wrote, read)
}

// parseKcat reads kcat -C output in kcatConsumeFormat.
func parseKcat(out []byte) ([]record, error) {
	var read []record
	br := bufio.NewReader(bytes.NewReader(out))
	for {
		line, err := br.ReadString('\n')
		if err == io.EOF && line == "" {
			return read, nil
		}
		if err != nil {
			return nil, fmt.Errorf("truncated record line %q: %w", line, err)
		}
		f := strings.SplitN(strings.TrimSuffix(line, "\n"), " ", 5)
		if len(f) != 5 {
			return nil, fmt.Errorf("record line %q: want 5 fields", line)
		}
		var r record
		var klen, vlen int
		var p int
		nums := []*int{&p, nil, &klen, &vlen}
		for i, s := range f[:4] {
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("record line %q: field %d: %w", line, i, err)
			}
			if i == 1 {
				r.Offset = n
			} else {
				*nums[i] = int(n)
			}
		}
		r.Partition = int32(p)
		if f[4] != "" {
			for _, kv := range strings.Split(f[4], ",") {
				k, v, _ := strings.Cut(kv, "=")
				r.Headers = append(r.Headers, header{Key: k, Value: v})
			}
		}
		if r.Key, err = readN(br, klen); err == nil {
			r.Value, err = readN(br, vlen)
		}
		if err != nil {
			return nil, fmt.Errorf("record %v: %w", line, err)
		}
		read = append(read, r)
	}
}

// readN reads n bytes (none for a null field, n = -1).
func readN(r io.Reader, n int) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
