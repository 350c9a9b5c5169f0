package coordinator

import (
	"fmt"
	"testing"
)

func TestFNV1a32MatchesPublishedVectors(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
	}{
		{"", 0x811c9dc5},
		{"a", 0xe40c292c},
		{"foobar", 0xbf9cf968},
	} {
		if got := FNV1a32(tc.in); got != tc.want {
			t.Errorf("FNV1a32(%q) = %#x, want %#x", tc.in, got, tc.want)
		}
	}
}

func TestPickSlotIsTheGroupsPartitionModuloRegisteredSortedByID(t *testing.T) {
	registered := []int32{2, 0, 10, 1} // sorted: 0 1 2 10
	for i := 0; i < 200; i++ {
		g := fmt.Sprintf("group-%d", i)
		want := []int32{0, 1, 2, 10}[FNV1a32(g)%50%4]
		got, ok := Pick(g, DefaultPartitions, registered, registered)
		if !ok || got != want {
			t.Fatalf("Pick(%q) = %d, %v; want %d", g, got, ok, want)
		}
	}
}

// The groups of one __consumer_offsets partition share its leader (Metadata and
// FindCoordinator tell one story), whatever the registry looks like.
func TestEveryGroupOfAPartitionHasThePartitionsLeaderAsCoordinator(t *testing.T) {
	for _, tc := range []struct {
		partitions        int32
		registered, alive []int32
	}{
		{50, []int32{0, 1, 2}, []int32{0, 1, 2}},
		{50, []int32{0, 1, 2}, []int32{0, 2}},
		{7, []int32{0, 1, 2, 3, 4}, []int32{4, 1}},
		{1, []int32{3, 5}, []int32{5}},
	} {
		for i := 0; i < 500; i++ {
			g := fmt.Sprintf("group-%d", i)
			p := Partition(g, tc.partitions)
			if p < 0 || p >= tc.partitions {
				t.Fatalf("Partition(%q, %d) = %d, outside the topic", g, tc.partitions, p)
			}
			leader, _ := PickPartition(p, tc.registered, tc.alive)
			if got, _ := Pick(g, tc.partitions, tc.registered, tc.alive); got != leader {
				t.Fatalf("%+v: group %q of partition %d coordinated by %d, the partition led by %d", tc, g, p, got, leader)
			}
		}
	}
}

func TestPartitionIsTheHashModuloThePartitionCount(t *testing.T) {
	for _, g := range []string{"", "a", "foobar", "orders-consumer"} {
		if got, want := Partition(g, 50), int32(FNV1a32(g)%50); got != want {
			t.Errorf("Partition(%q, 50) = %d, want %d", g, got, want)
		}
	}
	if got := Partition("a", 1); got != 0 {
		t.Errorf("Partition(a, 1) = %d, want 0", got)
	}
}

func TestPickIgnoresInputOrder(t *testing.T) {
	a := pickAll(200, []int32{0, 1, 2, 3}, []int32{0, 2, 3})
	b := pickAll(200, []int32{3, 1, 0, 2}, []int32{3, 0, 2})
	for g := range a {
		if a[g] != b[g] {
			t.Fatalf("group %s: %d with one order, %d with another", g, a[g], b[g])
		}
	}
}

func TestPickNothingAliveIsCoordinatorNotAvailable(t *testing.T) {
	for _, tc := range []struct {
		name              string
		registered, alive []int32
	}{
		{"no brokers at all", nil, nil},
		{"registered but none alive", []int32{0, 1, 2}, nil},
		{"alive but not registered", []int32{0, 1}, []int32{5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if id, ok := Pick("g", DefaultPartitions, tc.registered, tc.alive); ok {
				t.Fatalf("Pick = %d, want none", id)
			}
		})
	}
}

// The seed's acceptance case: of 200 groups over three brokers, losing one moves only the
// groups that hashed to it (about a third), none onto the dead broker, and the rest stay put.
func TestADeadBrokerMovesOnlyItsOwnGroups(t *testing.T) {
	registered := []int32{0, 1, 2}
	before := pickAll(200, registered, registered)
	after := pickAll(200, registered, []int32{0, 2}) // broker 1 is Dead: still registered

	moved := 0
	for g, was := range before {
		now := after[g]
		if now == 1 {
			t.Fatalf("group %s was placed on dead broker 1", g)
		}
		if was != now {
			moved++
			if was != 1 {
				t.Fatalf("group %s moved from live broker %d to %d", g, was, now)
			}
		}
	}
	if moved < 40 || moved > 90 {
		t.Fatalf("%d of 200 groups moved; want the ~1/3 that lived on broker 1 (40–90)", moved)
	}
}

// Draining is not alive: a draining broker's groups move away while it can still hand them
// over, but it stays registered, so no other group moves.
func TestDrainingBrokerKeepsTheDivisorAndLosesItsGroups(t *testing.T) {
	registered := []int32{0, 1, 2}
	before := pickAll(200, registered, registered)
	after := pickAll(200, registered, []int32{1, 2}) // 0 draining
	for g, was := range before {
		if after[g] == 0 {
			t.Fatalf("group %s still on draining broker 0", g)
		}
		if was != 0 && after[g] != was {
			t.Fatalf("group %s moved from %d to %d although %d is alive", g, was, after[g], was)
		}
	}
}

// The divisor is the registered count: dropping a dead broker from the registered list (the
// seed's bug) would rehash about two thirds of all groups. This pins the difference.
func TestDivisorIsTheRegisteredCountNotTheAliveCount(t *testing.T) {
	withDead := pickAll(200, []int32{0, 1, 2}, []int32{0, 2})
	withoutDead := pickAll(200, []int32{0, 2}, []int32{0, 2})
	differ := 0
	for g := range withDead {
		if withDead[g] != withoutDead[g] {
			differ++
		}
	}
	if differ == 0 {
		t.Fatal("dropping the dead broker from the registered set changed nothing; the divisor is not the registered count")
	}
}

func pickAll(n int, registered, alive []int32) map[string]int32 {
	out := make(map[string]int32, n)
	for i := 0; i < n; i++ {
		g := fmt.Sprintf("group-%d", i)
		id, ok := Pick(g, DefaultPartitions, registered, alive)
		if !ok {
			id = -1
		}
		out[g] = id
	}
	return out
}

func BenchmarkPick(b *testing.B) {
	registered := make([]int32, 100)
	for i := range registered {
		registered[i] = int32(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		Pick("orders-consumer", DefaultPartitions, registered, registered[:90])
	}
}

// A group whose slot's broker is not alive falls back to aliveSorted[slot % len(aliveSorted)]:
// here slot 1 (partition 1 or 6 of 10) over five registered brokers with broker 1 dead lands
// on live[1] = 2, where a fallback to live[0] (broker 0) would be wrong.
func TestPickFallbackIsTheSlotModuloTheAliveCount(t *testing.T) {
	registered, alive := []int32{0, 1, 2, 3, 4}, []int32{4, 3, 2, 0} // any order
	group := ""
	for i := 0; group == ""; i++ {
		if g := fmt.Sprintf("group-%d", i); FNV1a32(g)%10%5 == 1 {
			group = g
		}
	}
	id, ok := Pick(group, 10, registered, alive)
	if !ok || id != 2 {
		t.Fatalf("Pick(%q) = %d, %v; want 2 (slot 1 %% 4 alive = index 1 of [0 2 3 4])", group, id, ok)
	}
}
