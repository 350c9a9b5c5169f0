package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
)

func rule(topic string, op v1alpha1.ACLOperation) v1alpha1.ACLRule {
	return v1alpha1.ACLRule{Type: v1alpha1.ACLAllow, Resource: v1alpha1.ACLResource{Type: v1alpha1.ACLTopic, Name: topic, PatternType: v1alpha1.ACLLiteral},
		Operations: []v1alpha1.ACLOperation{op}, Host: "*"}
}

func addRule(r v1alpha1.ACLRule) func(*v1alpha1.KafkaUser) (bool, error) {
	return func(u *v1alpha1.KafkaUser) (bool, error) {
		if u.Spec.Authorization == nil {
			u.Spec.Authorization = &v1alpha1.UserAuthorization{}
		}
		u.Spec.Authorization.ACLs = append(u.Spec.Authorization.ACLs, r)
		return true, nil
	}
}

func topicsOf(t *testing.T, c client.Client, ns, name string) []string {
	t.Helper()
	u := &v1alpha1.KafkaUser{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range u.Spec.Authorization.ACLs {
		out = append(out, r.Resource.Name)
	}
	slices.Sort(out)
	return out
}

// TestUpdateUserNeverUndoesAConcurrentWrite: a KafkaUser written by someone else between the
// broker's read and its update makes the update conflict (it carries the resourceVersion it
// read); the retry applies the change to the new object, so both writes survive. A user
// created meanwhile is changed, not overwritten; another cluster's user is refused.
func TestUpdateUserNeverUndoesAConcurrentWrite(t *testing.T) {
	c := apiServer(t)
	ns := newNamespace(t)
	ctx := context.Background()
	a := &Admin{Client: c, Namespace: ns, Cluster: "c"}
	if err := c.Create(ctx, &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: ns},
		Spec: v1alpha1.KafkaUserSpec{Cluster: "c", Authorization: &v1alpha1.UserAuthorization{ACLs: []v1alpha1.ACLRule{rule("a", "Read")}}}}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	err := a.UpdateUser(ctx, "alice", false, func(u *v1alpha1.KafkaUser) (bool, error) {
		calls++
		if calls == 1 { // a user's own edit lands after the broker's read
			other := &v1alpha1.KafkaUser{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "alice"}, other); err != nil {
				t.Fatal(err)
			}
			other.Spec.Authorization.ACLs = append(other.Spec.Authorization.ACLs, rule("users-edit", "Read"))
			if err := c.Update(ctx, other); err != nil {
				t.Fatal(err)
			}
		}
		return addRule(rule("brokers-edit", "Write"))(u)
	})
	if err != nil || calls != 2 {
		t.Fatalf("update: %v after %d calls of change, want success on the retry", err, calls)
	}
	if got := topicsOf(t, c, ns, "alice"); !slices.Equal(got, []string{"a", "brokers-edit", "users-edit"}) {
		t.Fatalf("alice's rules %v, want the user's edit and the broker's", got)
	}

	calls = 0
	err = a.UpdateUser(ctx, "carol", true, func(u *v1alpha1.KafkaUser) (bool, error) {
		calls++
		if calls == 1 { // someone creates carol before the broker does
			if err := c.Create(ctx, &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "carol", Namespace: ns},
				Spec: v1alpha1.KafkaUserSpec{Cluster: "c", Authentication: &v1alpha1.UserAuthentication{Type: v1alpha1.UserScramSHA512},
					Authorization: &v1alpha1.UserAuthorization{ACLs: []v1alpha1.ACLRule{rule("theirs", "Read")}}}}); err != nil {
				t.Fatal(err)
			}
		}
		return addRule(rule("mine", "Read"))(u)
	})
	if err != nil || calls != 2 {
		t.Fatalf("create: %v after %d calls of change", err, calls)
	}
	if got := topicsOf(t, c, ns, "carol"); !slices.Equal(got, []string{"mine", "theirs"}) {
		t.Fatalf("carol's rules %v, want the creator's and the broker's", got)
	}
	u := &v1alpha1.KafkaUser{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "carol"}, u); err != nil || u.Spec.Authentication == nil {
		t.Fatalf("carol lost her authentication: %v %+v", err, u.Spec)
	}

	if err := c.Create(ctx, &v1alpha1.KafkaUser{ObjectMeta: metav1.ObjectMeta{Name: "dave", Namespace: ns}, Spec: v1alpha1.KafkaUserSpec{Cluster: "d"}}); err != nil {
		t.Fatal(err)
	}
	var notOurs *ErrUserNotOurs
	if err := a.UpdateUser(ctx, "dave", true, addRule(rule("x", "Read"))); !errors.As(err, &notOurs) {
		t.Fatalf("update cluster d's user: %v, want ErrUserNotOurs", err)
	}
	users, err := a.Users(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"alice", "carol"}) {
		t.Fatalf("Users %v, want cluster c's alice and carol", names)
	}
}
