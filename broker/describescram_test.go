package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/scram"
)

func TestDescribeUserScramCredentialsListsMechanismsAndIterationsOnly(t *testing.T) {
	sha512Only := credentials(t, "x")
	delete(sha512Only, scram.SHA256.Name)
	state := cluster.SecuritySnapshot{Credentials: map[string]scram.Stored{"alice": credentials(t, "pw"), "bob": sha512Only}, Users: map[string]cluster.User{}}
	sb := startSecuredBroker(t, state, cluster.ListenerSpec{Name: "plain"})
	conn := dialKafka(t, sb.addrs["plain"])
	describe := func(users ...string) *kmsg.DescribeUserSCRAMCredentialsResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
		for _, u := range users {
			ru := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
			ru.Name = u
			req.Users = append(req.Users, ru)
		}
		return roundTrip(t, conn, latest(req)).(*kmsg.DescribeUserSCRAMCredentialsResponse)
	}
	all := describe()
	if len(all.Results) != 2 || all.Results[0].User != "alice" || all.Results[1].User != "bob" {
		t.Fatalf("every user: %+v, want alice and bob by name", all.Results)
	}
	if infos := all.Results[0].CredentialInfos; len(infos) != 2 || infos[0].Mechanism != 1 || infos[1].Mechanism != 2 || infos[0].Iterations != scram.MinIterations {
		t.Errorf("alice: %+v, want SCRAM-SHA-256 and SCRAM-SHA-512 at %d iterations", infos, scram.MinIterations)
	}
	if infos := all.Results[1].CredentialInfos; len(infos) != 1 || infos[0].Mechanism != 2 {
		t.Errorf("bob: %+v, want SCRAM-SHA-512 only", infos)
	}
	named := describe("bob", "mallory", "alice", "alice")
	want := []struct {
		user string
		code int16
	}{{"bob", 0}, {"mallory", kerr.ResourceNotFound.Code}, {"alice", kerr.DuplicateResource.Code}}
	if len(named.Results) != len(want) {
		t.Fatalf("named: %+v, want one result per distinct user", named.Results)
	}
	for i, w := range want {
		if r := named.Results[i]; r.User != w.user || r.ErrorCode != w.code {
			t.Errorf("result %d: %s code %d, want %s code %d", i, r.User, r.ErrorCode, w.user, w.code)
		}
	}
}
