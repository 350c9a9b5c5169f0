package interop

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// ping connects as cr to the cluster's first broker and answers the error of a Ping (nil: it
// authenticated and was answered).
func ping(t *testing.T, c *kubebrokers.Cluster, cr credential) error {
	t.Helper()
	cl, err := kgo.NewClient(append(cr.kgo(c), kgo.SeedBrokers(c.Addrs[0]), kgo.RequestRetries(0))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(testCtx(t), 5*time.Second)
	defer cancel()
	return cl.Ping(ctx)
}

// TestAlterUserScramCredentialsThroughKadmChangesAKafkaUsersPassword: kadm as the admin sets
// bob's (a KafkaUser with a generated password) SCRAM-SHA-512 credential to a new password
// (kadm salts it) and gives dora (no KafkaUser) one. The broker hands the derived keys to the
// KafkaUsers, the KafkaUser reconciler writes them to c-scram-credentials, and a kgo client
// then logs in with each new password while bob's old one is refused; bob's password Secret
// is gone, and no object holds a password. DescribeUserScramCredentials reports the new
// iterations. Deleting dora's credential refuses her next login.
func TestAlterUserScramCredentialsThroughKadmChangesAKafkaUsersPassword(t *testing.T) {
	c, _ := aclCluster(t, "interop-scramw")
	old := credential{auth: v1alpha1.AuthenticationScramSHA512, user: "bob"}
	old.pass = c.AddKafkaUser("bob")
	waitAdmitted(t, c, old)
	adm := kadm.NewClient(c.Kgo())
	ctx := testCtx(t)

	bob := credential{auth: v1alpha1.AuthenticationScramSHA512, user: "bob", pass: "bobs-new-password-2026"}
	dora := credential{auth: v1alpha1.AuthenticationScramSHA512, user: "dora", pass: "doras-password-2026"}
	altered, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: bob.user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: bob.pass},
		{User: dora.user, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: dora.pass},
	})
	if err != nil || altered.Error() != nil {
		t.Fatalf("AlterUserSCRAMs: %v %v", err, altered.Error())
	}
	testkit.Eventually(t, "bob to log in with his new password", func() bool { return ping(t, c, bob) == nil })
	testkit.Eventually(t, "dora to log in", func() bool { return ping(t, c, dora) == nil })
	if err := ping(t, c, old); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("bob's old password: %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	described, err := adm.DescribeUserSCRAMs(ctx, "bob", "dora")
	if err != nil {
		t.Fatal(err)
	}
	iterations := map[string]int32{}
	for user, d := range described {
		if d.Err != nil {
			t.Fatalf("describe %s: %v", user, d.Err)
		}
		for _, info := range d.CredInfos {
			if info.Mechanism == kadm.ScramSha512 {
				iterations[user] = info.Iterations
			}
		}
	}
	if iterations["bob"] != 8192 || iterations["dora"] != 4096 {
		t.Fatalf("DescribeUserScramCredentials: SCRAM-SHA-512 iterations %v, want bob 8192 and dora 4096", iterations)
	}

	for _, name := range []string{"bob", "dora"} {
		u := &v1alpha1.KafkaUser{}
		if err := kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: name}, u); err != nil {
			t.Fatal(err)
		}
		if u.Spec.Authentication == nil || u.Spec.Authentication.ScramCredentials == nil || u.Spec.Authentication.ScramCredentials.SHA512 == nil {
			t.Fatalf("KafkaUser %s: %+v, want the set SCRAM-SHA-512 credential", name, u.Spec.Authentication)
		}
		text, _ := json.Marshal(u)
		if strings.Contains(string(text), bob.pass) || strings.Contains(string(text), dora.pass) {
			t.Fatalf("KafkaUser %s holds a password", name)
		}
	}
	testkit.Eventually(t, "bob's password Secret to be removed", func() bool {
		return apierrors.IsNotFound(kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: "bob"}, &corev1.Secret{}))
	})

	deleted, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: dora.user, Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || deleted.Error() != nil {
		t.Fatalf("delete dora's credential: %v %v", err, deleted.Error())
	}
	testkit.Eventually(t, "dora to be refused", func() bool { return errors.Is(ping(t, c, dora), kerr.SaslAuthenticationFailed) })
	again, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: dora.user, Mechanism: kadm.ScramSha512}}, nil)
	if err != nil || !errors.Is(again["dora"].Err, kerr.ResourceNotFound) {
		t.Fatalf("deleting dora's credential again: %v %+v, want RESOURCE_NOT_FOUND", err, again)
	}
}
