package txn

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/paddock-dev/paddock/broker/storage"
)

// FuzzReadState: any bytes in a state file either read as an error or as a Txn that writes
// back to the same Txn; never a panic, never a silent "no state".
func FuzzReadState(f *testing.F) {
	dir := f.TempDir()
	fence, err := storage.OpenFence(storage.OSFS{}, filepath.Join(dir, fenceDirName))
	if err != nil {
		f.Fatal(err)
	}
	if err := fence.Claim(1); err != nil {
		f.Fatal(err)
	}
	s := &store{fs: storage.OSFS{}, dir: dir, epoch: 1, fence: fence}
	if err := s.write(Txn{ID: "tx", ProducerID: 5, ProducerEpoch: 2, State: Ongoing, Partitions: []TopicPartition{{"a", 1}}}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, stateName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:7])
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, stateName(1)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		got, found, err := s.read(1)
		if err != nil {
			return
		}
		if !found {
			t.Fatal("an existing file read as no state")
		}
		if err := s.write(got); err != nil {
			t.Fatal(err)
		}
		again, _, err := s.read(1)
		if err != nil || !reflect.DeepEqual(again, got) {
			t.Fatalf("round trip: %+v → %+v (%v)", got, again, err)
		}
	})
}
