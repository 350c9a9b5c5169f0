package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"k8s.io/apimachinery/pkg/util/validation"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/scram"
)

// AlterUserScramCredentials (key 51): version 0, Apache 3.7's (docs/security.md, "KafkaUser").
//
// Behaviour:
//   - The client salts its password (upsertion: name, mechanism, iterations, salt, salted
//     password); the broker derives StoredKey and ServerKey (scram.FromSalted) and hands
//     them, never the salted password, to KafkaUser <name> as
//     spec.authentication.scramCredentials through cluster.Admin.UpdateUser (read, change,
//     update with the resourceVersion read, retried on a conflict). The KafkaUser reconciler
//     — the one writer of the cluster's credentials Secret — then writes exactly those
//     credentials and removes the user's password Secret; the brokers check them once their
//     informer sees that Secret (within about a second). A name with no KafkaUser gets one
//     (scram-sha-512, ACLs none, spec.cluster this cluster, the cluster's labels).
//   - The other mechanism keeps its credential, as Apache's: a user whose credentials the
//     operator made from a password has them copied (as the broker holds them) beside the
//     new one; from then on the user's credentials are the set ones, no password.
//   - A deletion removes that mechanism's credential from the set ones (a user whose
//     credentials come from a password has the other mechanism's copied, as above).
//   - One result per user, in the order first named. The answer's success is the
//     KafkaUser write's.
//   - Errors per user (Apache's ScramControlManager and KafkaApis): a user named twice in
//     the request → DUPLICATE_RESOURCE (nothing of it changes); an empty name, iterations
//     outside 4096–16384, an empty salt or a salted password not of the mechanism's hash
//     size → UNACCEPTABLE_CREDENTIAL; a mechanism other than SCRAM-SHA-256 (1) or
//     SCRAM-SHA-512 (2) → UNSUPPORTED_SASL_MECHANISM; deleting a credential the user does
//     not have → RESOURCE_NOT_FOUND. paddock's own: a name that is no KafkaUser object name,
//     a tls KafkaUser, a KafkaUser with a password Secret (spec.authentication.password: its
//     password is the user's to change there) or of another cluster → UNACCEPTABLE_CREDENTIAL
//     saying why. A refused API write answers with its API error's code (userWriteError).
//   - Authorization (Apache's handleAlterUserScramCredentialsRequest): ALTER on the cluster,
//     else every user CLUSTER_AUTHORIZATION_FAILED and nothing written.
func init() { register(51, 0, 0, handleAlterUserScramCredentials) }

func handleAlterUserScramCredentials(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)

	// Every user's changes, in the order first named; count says who is named twice.
	var order []string
	changes := map[string]*scramChange{}
	count := map[string]int{}
	note := func(name string) *scramChange {
		count[name]++
		c := changes[name]
		if c == nil {
			c = &scramChange{}
			changes[name] = c
			order = append(order, name)
		}
		return c
	}
	for _, d := range req.Deletions {
		c := note(d.Name)
		if c.code == 0 {
			c.deletions = append(c.deletions, d.Mechanism)
			c.code, c.msg = checkScramTarget(d.Name, d.Mechanism)
		}
	}
	for _, u := range req.Upsertions {
		c := note(u.Name)
		if c.code != 0 {
			continue
		}
		if c.code, c.msg = checkScramTarget(u.Name, u.Mechanism); c.code != 0 {
			continue
		}
		m, _ := scram.MechanismOfCode(u.Mechanism)
		cred, err := m.FromSalted(u.SaltedPassword, u.Salt, int(u.Iterations))
		switch {
		case u.Iterations < scram.MinIterations:
			c.code, c.msg = kerr.UnacceptableCredential.Code, "Too few iterations"
		case u.Iterations > scram.MaxIterations:
			c.code, c.msg = kerr.UnacceptableCredential.Code, "Too many iterations"
		case err != nil:
			c.code, c.msg = kerr.UnacceptableCredential.Code, fmt.Sprintf("the salt is empty or the salted password is not of %s's size", m.Name)
		default:
			c.upsertions = append(c.upsertions, scramSet{m, cred})
		}
	}
	allowed := rc.allowedCluster(acl.OpAlter)
	write, cancel := context.WithTimeout(rc.ctx, maxAdminWait)
	defer cancel()
	for _, name := range order {
		c := changes[name]
		r := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		r.User = name
		switch {
		case !allowed:
			c.code, c.msg = kerr.ClusterAuthorizationFailed.Code, msgClusterAuthorizationFailed
		case count[name] > 1:
			c.code, c.msg = kerr.DuplicateResource.Code, "A user credential cannot be altered twice in the same request"
		case c.code != 0:
		case rc.h.Admin == nil:
			c.code, c.msg = kerr.UnknownServerError.Code, errNoUserAdmin
		default:
			c.code, c.msg = rc.alterScram(write, name, c)
		}
		if c.code != 0 {
			r.ErrorCode, r.ErrorMessage = c.code, strptr(c.msg)
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}

// scramChange is what one request asks of one user's credentials, or why it is refused.
type scramChange struct {
	deletions  []int8
	upsertions []scramSet
	code       int16
	msg        string
}

type scramSet struct {
	mech scram.Mechanism
	cred scram.Credential
}

// checkScramTarget refuses a name that cannot be a KafkaUser's and a mechanism that is no
// SCRAM mechanism.
func checkScramTarget(name string, mechanism int8) (int16, string) {
	if name == "" {
		return kerr.UnacceptableCredential.Code, "Username must not be empty"
	}
	if _, ok := scram.MechanismOfCode(mechanism); !ok {
		return kerr.UnsupportedSaslMechanism.Code, "Unknown SCRAM mechanism"
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return kerr.UnacceptableCredential.Code, fmt.Sprintf("user %q cannot be a KafkaUser's (not a valid object name: lower case letters, digits, '-' and '.'); paddock keeps SCRAM credentials on KafkaUsers", name)
	}
	return 0, ""
}

// errNoCredential answers RESOURCE_NOT_FOUND (msgNoCredential, Apache's words) for deleting
// a credential the user lacks.
var errNoCredential = errors.New("no such credential")

const msgNoCredential = "Attempt to delete a user credential that does not exist"

// alterScram applies c to KafkaUser name's set credentials.
func (rc *requestContext) alterScram(write context.Context, name string, c *scramChange) (int16, string) {
	held := rc.h.security().Credentials[name] // what the operator made, for the copy
	err := rc.h.Admin.UpdateUser(write, name, len(c.upsertions) > 0, func(u *v1alpha1.KafkaUser) (bool, error) {
		if u == nil {
			if len(held) > 0 {
				// A hand-written credential of no KafkaUser (the interop harness' admin).
				return false, invalidACL("user " + name + "'s credential was written into the credentials Secret by hand, not through a KafkaUser; change it there")
			}
			return false, errNoCredential
		}
		auth := u.Spec.Authentication
		switch {
		case auth != nil && auth.Type == v1alpha1.UserTLS:
			return false, invalidACL("KafkaUser " + name + " authenticates with a tls client certificate, not SCRAM")
		case auth != nil && auth.Password != nil:
			return false, invalidACL("KafkaUser " + name + " takes its password from Secret " + auth.Password.SecretKeyRef.Name + ": change the password there")
		}
		set := &v1alpha1.ScramCredentials{}
		switch {
		case auth != nil && auth.ScramCredentials != nil:
			set = auth.ScramCredentials.DeepCopy()
		case auth != nil && auth.Type == v1alpha1.UserScramSHA512:
			for _, m := range scram.Mechanisms {
				if cred, ok := held[m.Name]; ok {
					*slotOf(set, m) = credentialOf(cred)
				}
			}
		}
		for _, code := range c.deletions {
			m, _ := scram.MechanismOfCode(code)
			slot := slotOf(set, m)
			if *slot == nil {
				return false, errNoCredential
			}
			*slot = nil
		}
		for _, s := range c.upsertions {
			*slotOf(set, s.mech) = credentialOf(s.cred)
		}
		u.Spec.Authentication = &v1alpha1.UserAuthentication{Type: v1alpha1.UserScramSHA512, ScramCredentials: set}
		return true, nil
	})
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, errNoCredential):
		return kerr.ResourceNotFound.Code, msgNoCredential
	}
	code, msg := userWriteError(err)
	if code == kerr.InvalidRequest.Code {
		code = kerr.UnacceptableCredential.Code
	}
	return code, msg
}

// slotOf is set's field for mechanism m.
func slotOf(set *v1alpha1.ScramCredentials, m scram.Mechanism) **v1alpha1.ScramCredential {
	if m.Name == scram.SHA256.Name {
		return &set.SHA256
	}
	return &set.SHA512
}

func credentialOf(c scram.Credential) *v1alpha1.ScramCredential {
	return &v1alpha1.ScramCredential{Iterations: int32(c.Iterations), Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey}
}
