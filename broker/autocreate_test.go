package broker

import (
	"sync"
	"testing"
)

func TestAutoCreationRunsOncePerNameAndIsBounded(t *testing.T) {
	a := newAutoCreator()
	release := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	create := func(name string) func() {
		return func() {
			mu.Lock()
			runs[name]++
			mu.Unlock()
			<-release
		}
	}
	if !a.start("t", create("t")) {
		t.Fatal("first creation of t not started")
	}
	if a.start("t", create("t")) {
		t.Error("a second creation of t started while the first is in flight")
	}
	for i := 1; i < maxAutoCreates; i++ {
		if !a.start(string(rune('a'+i%26))+string(rune('0'+i/26)), func() { <-release }) {
			t.Fatalf("creation %d of %d not started", i+1, maxAutoCreates)
		}
	}
	if a.start("one-too-many", func() {}) {
		t.Errorf("more than %d creations in flight", maxAutoCreates)
	}
	close(release)
	a.wait()
	if !a.start("t", func() {}) {
		t.Error("t cannot be created again once its creation ended")
	}
	a.wait()
	if runs["t"] != 1 {
		t.Errorf("t created %d times while in flight, want 1", runs["t"])
	}
}
