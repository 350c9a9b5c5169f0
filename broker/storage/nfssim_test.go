package storage

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// The simulator's own rules: each is something a real NFS client does and the storage rules
// must survive, so a simulator that lost one would make the suites that run on it pass for
// the wrong reason.

func TestNFSSimServesListingsAndNegativeLookupsFromACache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sim := NewNFSSim(NFSSimOptions{Staleness: time.Second, Seed: 1})
		a, b := sim.Client(), sim.Client()
		if err := a.MkdirAll("/d"); err != nil {
			t.Fatal(err)
		}
		if names, _ := b.ReadDirNames("/d"); len(names) != 0 {
			t.Fatalf("empty directory lists %v", names)
		}
		if _, err := b.OpenFile("/d/x", os.O_RDONLY, 0); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("open of a missing file: %v", err)
		}
		if err := writeNew(a, "/d/x", []byte("hello")); err != nil {
			t.Fatal(err)
		}
		stale := 0
		for range 200 { // until the caches expire: some answers were stale
			names, _ := b.ReadDirNames("/d")
			_, err := b.OpenFile("/d/x", os.O_RDONLY, 0)
			if len(names) == 0 && err != nil {
				stale++
				time.Sleep(10 * time.Millisecond)
				continue
			}
			break
		}
		if stale == 0 {
			t.Fatal("another client saw the new file at once: the listing and negative lookup caches are not modelled")
		}
		time.Sleep(time.Second)
		names, _ := b.ReadDirNames("/d")
		f, err := b.OpenFile("/d/x", os.O_RDONLY, 0)
		if len(names) != 1 || err != nil {
			t.Fatalf("after the staleness bound: %v %v", names, err)
		}
		_ = f.Close()
		// An exclusive link asks the server, whatever the cache says.
		if err := b.Link("/d/x", "/d/x"); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("link onto an existing name: %v", err)
		}
	})
}

func TestNFSSimGivesCloseToOpenVisibilityAndCommitsOnlyTheSyncingClientsWrites(t *testing.T) {
	sim := NewNFSSim(NFSSimOptions{Seed: 2})
	a, b := sim.Client(), sim.Client()
	_ = a.MkdirAll("/d")
	fa, err := a.OpenFile("/d/f", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fa.WriteAt([]byte("aaaa"), 0)
	fb, _ := b.OpenFile("/d/f", os.O_RDWR, 0)
	if n, _ := fb.Size(); n != 0 {
		t.Fatalf("b sees %d bytes a has not flushed", n)
	}
	_ = fb.Close()
	_ = fa.Sync() // flushed and committed: a's
	fb, _ = b.OpenFile("/d/f", os.O_RDWR, 0)
	if n, _ := fb.Size(); n != 4 {
		t.Fatalf("after a's fsync, b's next open sees %d bytes, want 4", n)
	}
	_, _ = fb.WriteAt([]byte("bbbb"), 4)
	_ = fb.Close() // flushed, not committed
	_ = fb.Close()
	_ = fa.Sync() // commits a's writes only
	b.Crash()     // b will never resend its write
	sim.CrashServer()
	c := sim.Client()
	got, err := readFile(c, "/d/f")
	if err != nil || string(got) != "aaaa" {
		t.Fatalf("after a server crash: %q %v, want only the committed \"aaaa\"", got, err)
	}
	if _, err := fa.ReadAt(make([]byte, 1), 0); err != nil {
		t.Fatalf("a live client's handle after the server crash: %v", err)
	}
	if err := c.Remove("/d/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := fa.ReadAt(make([]byte, 1), 0); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("read of a file another client removed: %v, want ESTALE", err)
	}
}
