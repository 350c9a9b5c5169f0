package storage

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"
	"time"
)

func TestTheVolumeCheckPassesALocalDiskAndNFSWithCloseToOpen(t *testing.T) {
	dir := t.TempDir()
	local, err := CheckVolume(context.Background(), OSFS{}, OSFS{}, dir, dir, 30)
	if err != nil || !local.OK() {
		t.Fatalf("a local disk: %v\n%s", err, local)
	}
	t.Logf("local disk:\n%s", local)
	sim := NewNFSSim(NFSSimOptions{Staleness: 40 * time.Millisecond, Seed: 4})
	a, b := sim.Client(), sim.Client()
	_ = a.MkdirAll("/vol")
	nfs, err := CheckVolume(context.Background(), a, b, "/vol", "/vol", 30)
	if err != nil || !nfs.OK() {
		t.Fatalf("NFS with close-to-open: %v\n%s", err, nfs)
	}
	t.Logf("NFS simulation:\n%s", nfs)
	if names, _ := (OSFS{}).ReadDirNames(dir); len(names) != 0 {
		t.Fatalf("the check left %v behind", names)
	}
}

// TestTheVolumeCheckFailsEachPropertyAVolumeLacks: a volume that lacks a property fails that
// property by name, so a check that passes means something.
func TestTheVolumeCheckFailsEachPropertyAVolumeLacks(t *testing.T) {
	for _, tc := range []struct {
		name string
		fsys func(dir string) (FS, FS, string, string)
		fail []string
	}{
		{"exclusive create and link that are not exclusive", func(dir string) (FS, FS, string, string) {
			return nonExclusiveFS{OSFS{}}, nonExclusiveFS{OSFS{}}, dir, dir
		}, []string{PropExclusiveCreate, PropExclusiveLink}},
		{"a rename that copies", func(dir string) (FS, FS, string, string) {
			return copyingRenameFS{OSFS{}}, copyingRenameFS{OSFS{}}, dir, dir
		}, []string{PropAtomicRename}},
		{"a mount without close-to-open (nocto)", func(string) (FS, FS, string, string) {
			sim := NewNFSSim(NFSSimOptions{NoCloseToOpen: true, Seed: 5})
			a, b := sim.Client(), sim.Client()
			_ = a.MkdirAll("/vol")
			return a, b, "/vol", "/vol"
		}, []string{PropWriteIntoOpened}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b, da, db := tc.fsys(t.TempDir())
			r, err := CheckVolume(context.Background(), a, b, da, db, 40)
			if err != nil {
				t.Fatal(err)
			}
			var failed []string
			for _, p := range r.Properties {
				if !p.OK {
					failed = append(failed, p.Name)
				}
			}
			if r.OK() || len(failed) != len(tc.fail) || failed[0] != tc.fail[0] || failed[len(failed)-1] != tc.fail[len(tc.fail)-1] {
				t.Fatalf("failed %v, want %v:\n%s", failed, tc.fail, r)
			}
			t.Logf("\n%s", r)
		})
	}
}

// nonExclusiveFS ignores O_EXCL and lets a link replace its target.
type nonExclusiveFS struct{ FS }

func (n nonExclusiveFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return n.FS.OpenFile(name, flag&^os.O_EXCL, perm)
}

func (n nonExclusiveFS) Link(oldpath, newpath string) error {
	err := n.FS.Link(oldpath, newpath)
	if errors.Is(err, fs.ErrExist) {
		_ = n.Remove(newpath)
		return n.FS.Link(oldpath, newpath)
	}
	return err
}

// copyingRenameFS renames by copying the file over its target in two halves, leaving the
// target half-written for a while between them.
type copyingRenameFS struct{ FS }

func (c copyingRenameFS) Rename(oldpath, newpath string) error {
	b, err := readFile(c.FS, oldpath)
	if err != nil {
		return err
	}
	f, err := c.OpenFile(newpath, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	half := len(b) / 2
	for i, part := range [][]byte{b[:half], b[half:]} {
		if _, err := f.WriteAt(part, int64(i*half)); err != nil {
			_ = f.Close()
			return err
		}
		if i == 0 {
			time.Sleep(2 * time.Millisecond)
		}
	}
	if err := f.Close(); err != nil {
		return err
	}
	return c.Remove(oldpath)
}
