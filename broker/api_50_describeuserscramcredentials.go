package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/scram"
)

// DescribeUserScramCredentials (key 50): version 0, Apache 3.7's (docs/security.md,
// "KafkaUser").
//
// Behaviour:
//   - Answered from the salted credentials the broker checks SCRAM against (the cluster's
//     credentials Secret, written by the KafkaUser reconciler): per user, the mechanisms it
//     has a credential for and their iterations; never a salt or a key.
//   - Users null or empty: every user with a credential, by name. A user named twice:
//     DUPLICATE_RESOURCE for it (once); a user without a credential: RESOURCE_NOT_FOUND.
//     Results come in the order of the request, one per distinct user.
//   - Authorization (Apache's handleDescribeUserScramCredentialsRequest): DESCRIBE on the
//     cluster, else no results and the top-level error CLUSTER_AUTHORIZATION_FAILED.
func init() { register(50, 0, 0, handleDescribeUserScramCredentials) }

func handleDescribeUserScramCredentials(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if !rc.allowedCluster(acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	creds := rc.h.security().Credentials
	var names []string
	if len(req.Users) == 0 {
		for name := range creds {
			names = append(names, name)
		}
		slices.Sort(names)
	} else {
		for _, u := range req.Users {
			names = append(names, u.Name)
		}
	}
	count := map[string]int{}
	for _, n := range names {
		count[n]++
	}
	answered := map[string]bool{}
	for _, name := range names {
		if answered[name] {
			continue
		}
		answered[name] = true
		r := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
		r.User = name
		stored, ok := creds[name]
		switch {
		case count[name] > 1:
			r.ErrorCode = kerr.DuplicateResource.Code
			msg := "Cannot describe SCRAM credentials for the same user twice in a single request: " + name
			r.ErrorMessage = &msg
		case !ok || len(stored) == 0:
			r.ErrorCode = kerr.ResourceNotFound.Code
			msg := "Attempt to describe a user credential that does not exist: " + name
			r.ErrorMessage = &msg
		default:
			for _, m := range scram.Mechanisms {
				if c, has := stored[m.Name]; has {
					info := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
					info.Mechanism, info.Iterations = m.Code, int32(c.Iterations)
					r.CredentialInfos = append(r.CredentialInfos, info)
				}
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
