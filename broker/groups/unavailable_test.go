package groups

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupRequest is a request of every group API key at version v, naming group "g", member
// "m" and partitions of a known topic ("t") and an unknown one ("gone").
func groupRequest(key, v int16) kmsg.Request {
	parts := []int32{0, 1}
	switch key {
	case 8:
		r := kmsg.NewPtrOffsetCommitRequest()
		r.Group, r.MemberID, r.Generation = "g", "m", 1
		for _, topic := range []string{"t", "gone"} {
			rt := kmsg.NewOffsetCommitRequestTopic()
			rt.Topic = topic
			for _, p := range parts {
				rp := kmsg.NewOffsetCommitRequestTopicPartition()
				rp.Partition, rp.Offset = p, 5
				rt.Partitions = append(rt.Partitions, rp)
			}
			r.Topics = append(r.Topics, rt)
		}
		r.Version = v
		return r
	case 9:
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t", Partitions: parts}}
		r.Groups = []kmsg.OffsetFetchRequestGroup{{Group: "g", Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: parts}}}}
		r.Version = v
		return r
	case 11:
		r := kmsg.NewPtrJoinGroupRequest()
		r.Group, r.MemberID, r.ProtocolType = "g", "m", "consumer"
		r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 10000, 10000
		r.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{1}}}
		r.Version = v
		return r
	case 12:
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.Generation, r.Version = "g", "m", 1, v
		return r
	case 13:
		r := kmsg.NewPtrLeaveGroupRequest()
		r.Group, r.MemberID, r.Version = "g", "m", v
		r.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		return r
	case 14:
		r := kmsg.NewPtrSyncGroupRequest()
		r.Group, r.MemberID, r.Generation, r.Version = "g", "m", 1, v
		r.ProtocolType, r.Protocol = strp("consumer"), strp("range")
		return r
	case 15:
		r := kmsg.NewPtrDescribeGroupsRequest()
		r.Groups, r.Version = []string{"g", "h"}, v
		return r
	case 16:
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = v
		return r
	case 42:
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Groups, r.Version = []string{"g", "h"}, v
		return r
	case 28:
		r := txnReq("g", 1, 0, 1, "m", map[int32]int64{0: 5})
		r.Version = v
		return r
	case 47:
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group, r.Version = "g", v
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return r
	case 68:
		r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		r.Group, r.MemberID, r.RebalanceTimeoutMillis, r.Version = "g", "m", 10000, v
		r.SubscribedTopicNames, r.Topics = []string{"t"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		return r
	case 69:
		r := kmsg.NewPtrConsumerGroupDescribeRequest()
		r.Groups, r.Version = []string{"g", "h"}, v
		return r
	}
	panic(fmt.Sprintf("no group request for key %d", key))
}

// callAPI runs req through the API method of its key.
func callAPI(ctx context.Context, c *Coordinator, req kmsg.Request) (kmsg.Response, error) {
	cl := Client{ID: "client", Host: "/127.0.0.1"}
	switch r := req.(type) {
	case *kmsg.OffsetCommitRequest:
		return c.OffsetCommit(ctx, r)
	case *kmsg.OffsetFetchRequest:
		return c.OffsetFetch(ctx, r)
	case *kmsg.JoinGroupRequest:
		return c.JoinGroup(ctx, cl, r)
	case *kmsg.HeartbeatRequest:
		return c.Heartbeat(ctx, r)
	case *kmsg.LeaveGroupRequest:
		return c.LeaveGroup(ctx, r)
	case *kmsg.SyncGroupRequest:
		return c.SyncGroup(ctx, r)
	case *kmsg.DescribeGroupsRequest:
		return c.DescribeGroups(ctx, r)
	case *kmsg.ListGroupsRequest:
		return c.ListGroups(ctx, r)
	case *kmsg.DeleteGroupsRequest:
		return c.DeleteGroups(ctx, r)
	case *kmsg.OffsetDeleteRequest:
		return c.OffsetDelete(ctx, r)
	case *kmsg.TxnOffsetCommitRequest:
		return c.TxnOffsetCommit(ctx, r)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		return c.ConsumerGroupHeartbeat(ctx, cl, r)
	case *kmsg.ConsumerGroupDescribeRequest:
		return c.ConsumerGroupDescribe(ctx, r)
	}
	return nil, fmt.Errorf("not a group request: %T", req)
}

// A broker without a coordinator answers with Unavailable's answers: byte for byte what a
// coordinator answers before its first view, at every served version of every group API, and
// COORDINATOR_NOT_AVAILABLE somewhere in each (UNSUPPORTED_VERSION for OffsetCommit and
// OffsetFetch v0, which no coordinator serves).
func TestUnavailableAnswersAsACoordinatorBeforeItsFirstView(t *testing.T) {
	topics := newTestTopics()
	cfg := DefaultConfig()
	cfg.Dir, cfg.Topics = t.TempDir(), topics
	beforeView, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = beforeView.Close() })
	unavailable := Unavailable(topics)
	unavailable.SetView(1, allGroups) // ignored: it never serves
	for key, r := range versionRanges {
		for v := r[0]; v <= r[1]; v++ {
			t.Run(fmt.Sprintf("%s v%d", kmsg.NameForKey(key), v), func(t *testing.T) {
				want, err := callAPI(ctxT(t), beforeView, groupRequest(key, v))
				if err != nil {
					t.Fatal(err)
				}
				got, err := callAPI(ctxT(t), unavailable, groupRequest(key, v))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got.AppendTo(nil), want.AppendTo(nil)) {
					t.Fatalf("answer %+v, want the coordinator's before its first view: %+v", got, want)
				}
				code := kerr.CoordinatorNotAvailable
				if (key == 8 || key == 9) && v == 0 {
					code = kerr.UnsupportedVersion // answered before the coordinator is asked, as KRaft Apache does
				}
				if !bytes.Contains(got.AppendTo(nil), []byte{0, byte(code.Code)}) {
					t.Fatalf("answer %+v carries no %s", got, code.Message)
				}
			})
		}
	}
	if n := unavailable.Owned(); n != 0 {
		t.Fatalf("Unavailable holds %d groups", n)
	}
	_ = unavailable.Close() // nothing to close; safe
}
