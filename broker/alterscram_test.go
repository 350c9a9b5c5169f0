package broker

import (
	"crypto/pbkdf2"
	"crypto/sha512"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/scram"
)

// saltedUpsertion is the SCRAM-SHA-512 upsertion a client sends for user's password: the
// client salts (as kadm's AlterUserSCRAMs does).
func saltedUpsertion(t *testing.T, user, password string, iterations int32) kmsg.AlterUserSCRAMCredentialsRequestUpsertion {
	t.Helper()
	salt := []byte("salt-of-" + user)
	salted, err := pbkdf2.Key(sha512.New, password, salt, int(max(iterations, 1)), sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	u := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	u.Name, u.Mechanism, u.Iterations, u.Salt, u.SaltedPassword = user, scram.SHA512.Code, iterations, salt, salted
	return u
}

// alterScram upserts user's SCRAM-SHA-512 credential of password.
func alterScram(t *testing.T, ab *aclBroker, user, password string, iterations int32) *kmsg.AlterUserSCRAMCredentialsResponse {
	t.Helper()
	req := latest(kmsg.NewPtrAlterUserSCRAMCredentialsRequest())
	req.Upsertions = append(req.Upsertions, saltedUpsertion(t, user, password, iterations))
	return ab.request(t, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
}

func TestAlterUserScramCredentialsHandsTheDerivedKeysToTheKafkaUser(t *testing.T) {
	ab := startACLBroker(t, true)
	ab.grant(allow(v1alpha1.ACLCluster, "", acl.OpAlter))

	if r := alterScram(t, ab, "sam", "sam-password", 8192).Results; len(r) != 1 || r[0].User != "sam" || r[0].ErrorCode != 0 {
		t.Fatalf("upserting sam answered %+v, want success", r)
	}
	sam := ab.kafkaUser(t, "sam")
	if sam == nil || sam.Spec.Cluster != "c" || sam.Spec.Authentication == nil || sam.Spec.Authentication.Type != v1alpha1.UserScramSHA512 ||
		sam.Spec.Authentication.ScramCredentials == nil || sam.Spec.Authentication.ScramCredentials.SHA512 == nil || sam.Spec.Authentication.ScramCredentials.SHA256 != nil {
		t.Fatalf("KafkaUser sam %+v, want a new scram user of cluster c with the set SCRAM-SHA-512 credential alone", sam)
	}
	set := sam.Spec.Authentication.ScramCredentials.SHA512
	cred := scram.Credential{Salt: set.Salt, Iterations: int(set.Iterations), StoredKey: set.StoredKey, ServerKey: set.ServerKey}
	if !scram.SHA512.Verify(cred, "sam-password") || set.Iterations != 8192 {
		t.Fatalf("the set credential %+v is not sam-password's at 8192 iterations", set)
	}

	// A user whose credentials the operator made from a password keeps the other mechanism's,
	// as the broker holds it; a password Secret of the user's own is not overridden.
	ab.ensureUser(t, "olga")
	olga := ab.kafkaUser(t, "olga")
	olga.Spec.Authentication = &v1alpha1.UserAuthentication{Type: v1alpha1.UserScramSHA512}
	if err := ab.kube.Update(t.Context(), olga); err != nil {
		t.Fatal(err)
	}
	generated256, _ := scram.SHA256.Salt("generated", []byte("s256"), 4096)
	generated512, _ := scram.SHA512.Salt("generated", []byte("s512"), 4096)
	ab.sec.Set(cluster.SecuritySnapshot{
		Users:       map[string]cluster.User{anonymous: {Name: "anonymous", Principal: anonymous, ACLs: []v1alpha1.ACLRule{allow(v1alpha1.ACLCluster, "", acl.OpAlter)}}},
		Credentials: map[string]scram.Stored{"olga": {scram.SHA256.Name: generated256, scram.SHA512.Name: generated512}, "root": {scram.SHA512.Name: generated512}},
	})
	if r := alterScram(t, ab, "olga", "olga-new", 4096).Results[0]; r.ErrorCode != 0 {
		t.Fatalf("upserting olga: %d %v", r.ErrorCode, r.ErrorMessage)
	}
	got := ab.kafkaUser(t, "olga").Spec.Authentication.ScramCredentials
	if got == nil || got.SHA256 == nil || string(got.SHA256.StoredKey) != string(generated256.StoredKey) || got.SHA512 == nil ||
		!scram.SHA512.Verify(scram.Credential{Salt: got.SHA512.Salt, Iterations: int(got.SHA512.Iterations), StoredKey: got.SHA512.StoredKey, ServerKey: got.SHA512.ServerKey}, "olga-new") {
		t.Fatalf("olga's set credentials %+v, want the generated SCRAM-SHA-256 one kept and the new SCRAM-SHA-512 one", got)
	}

	// Apache's per-user errors; none of those users changes.
	req := latest(kmsg.NewPtrAlterUserSCRAMCredentialsRequest())
	del := func(name string, mech int8) {
		d := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
		d.Name, d.Mechanism = name, mech
		req.Deletions = append(req.Deletions, d)
	}
	del("sam", scram.SHA256.Code)    // sam has none
	del("twice", scram.SHA512.Code)  // named again below
	del("nobody", scram.SHA512.Code) // no KafkaUser, no credential
	req.Upsertions = append(req.Upsertions, saltedUpsertion(t, "twice", "p", 4096))
	req.Upsertions = append(req.Upsertions, saltedUpsertion(t, "few", "p", 4095)) // too few iterations
	bad := saltedUpsertion(t, "mech", "p", 4096)
	bad.Mechanism = 3
	req.Upsertions = append(req.Upsertions, bad, saltedUpsertion(t, "", "p", 4096), saltedUpsertion(t, "Upper", "p", 4096))
	short := saltedUpsertion(t, "short", "p", 4096)
	short.SaltedPassword = short.SaltedPassword[:10]
	req.Upsertions = append(req.Upsertions, short)
	want := map[string]int16{
		"sam": kerr.ResourceNotFound.Code, "twice": kerr.DuplicateResource.Code, "nobody": kerr.ResourceNotFound.Code,
		"few": kerr.UnacceptableCredential.Code, "mech": kerr.UnsupportedSaslMechanism.Code, "": kerr.UnacceptableCredential.Code,
		"Upper": kerr.UnacceptableCredential.Code, "short": kerr.UnacceptableCredential.Code,
	}
	before := ab.kafkaUser(t, "sam").ResourceVersion
	resp := ab.request(t, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(resp.Results) != len(want) {
		t.Fatalf("%d results, want one per user (%d): %+v", len(resp.Results), len(want), resp.Results)
	}
	for _, r := range resp.Results {
		if r.ErrorCode != want[r.User] {
			t.Errorf("user %q: code %d (%v), want %d", r.User, r.ErrorCode, r.ErrorMessage, want[r.User])
		}
	}
	for _, name := range []string{"twice", "few", "mech", "nobody", "short"} {
		if ab.kafkaUser(t, name) != nil {
			t.Errorf("a refused change created KafkaUser %s", name)
		}
	}
	if ab.kafkaUser(t, "sam").ResourceVersion != before {
		t.Error("deleting sam's absent SCRAM-SHA-256 credential wrote the KafkaUser")
	}

	// Deleting a set credential removes it; a credential written by hand is no KafkaUser's.
	req = latest(kmsg.NewPtrAlterUserSCRAMCredentialsRequest())
	del("sam", scram.SHA512.Code)
	del("root", scram.SHA512.Code)
	resp = ab.request(t, req).(*kmsg.AlterUserSCRAMCredentialsResponse)
	if resp.Results[0].ErrorCode != 0 || resp.Results[1].ErrorCode != kerr.UnacceptableCredential.Code {
		t.Fatalf("deleting sam's and root's credentials answered %+v, want success and UNACCEPTABLE_CREDENTIAL", resp.Results)
	}
	if set := ab.kafkaUser(t, "sam").Spec.Authentication.ScramCredentials; set == nil || set.SHA512 != nil || set.SHA256 != nil {
		t.Fatalf("sam's set credentials after the deletion %+v, want none (and no password)", set)
	}
}
