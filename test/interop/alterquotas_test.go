package interop

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/testkit"
	"github.com/paddock-dev/paddock/test/kubebrokers"
)

// TestKadmAlterClientQuotasSetsAKafkaUsersQuotas: kadm's AlterClientQuotas as the admin sets
// bob's producer_byte_rate (written to KafkaUser bob's spec.quotas by the broker, as its
// ServiceAccount), DescribeClientQuotas then reports it, and a removal unsets it again; a
// client-id entity is refused INVALID_REQUEST.
func TestKadmAlterClientQuotasSetsAKafkaUsersQuotas(t *testing.T) {
	c, _ := aclCluster(t, "interop-quotaw")
	c.AddKafkaUser("bob")
	adm := kadm.NewClient(c.Kgo())
	ctx := testCtx(t)
	bob := kadm.ClientQuotaEntity{{Type: "user", Name: strptr("bob")}}
	altered, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: bob, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1048576}}}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("alter bob's quota: %v %+v", err, altered)
	}
	u := &v1alpha1.KafkaUser{}
	if err := kubebrokers.Env.Client.Get(ctx, client.ObjectKey{Namespace: c.NS, Name: "bob"}, u); err != nil {
		t.Fatal(err)
	}
	if q := u.Spec.Quotas; q == nil || q.ProducerByteRate == nil || *q.ProducerByteRate != 1048576 {
		t.Fatalf("KafkaUser bob's quotas after AlterClientQuotas: %+v", q)
	}
	bobsQuota := func() (float64, bool) {
		described, err := adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchName: strptr("bob")}})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range described {
			for _, v := range d.Values {
				if v.Key == "producer_byte_rate" {
					return v.Value, true
				}
			}
		}
		return 0, false
	}
	testkit.Eventually(t, "DescribeClientQuotas to report bob's producer_byte_rate", func() bool {
		v, ok := bobsQuota()
		return ok && v == 1048576
	})
	altered, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: bob, Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}}})
	if err != nil || len(altered) != 1 || altered[0].Err != nil {
		t.Fatalf("remove bob's quota: %v %+v", err, altered)
	}
	testkit.Eventually(t, "DescribeClientQuotas to report no quota of bob's", func() bool {
		_, ok := bobsQuota()
		return !ok
	})
	altered, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: strptr("app")}},
		Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1}}}})
	if err != nil || len(altered) != 1 || !errors.Is(altered[0].Err, kerr.InvalidRequest) {
		t.Fatalf("a client-id quota: %v %+v, want INVALID_REQUEST", err, altered)
	}
}
