package topics

import (
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/storage"
)

func TestCreatePartitionsGrowsATopicWithLeaders(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	before, _ := c.leadersOn(ctx, 0, "orders")
	if v, err := adm.ValidateCreatePartitions(ctx, 3, "orders"); err != nil || v["orders"].Err != nil {
		t.Fatalf("validate-only: %+v %v", v, err)
	}
	if kt := c.topicObject("orders"); kt.Spec.Partitions != 2 {
		t.Fatalf("validate-only grew the topic to %d", kt.Spec.Partitions)
	}
	resp, err := adm.CreatePartitions(ctx, 4, "orders")
	if err != nil || resp["orders"].Err != nil {
		t.Fatalf("create partitions: %+v %v", resp, err)
	}
	after, code := c.leadersOn(ctx, 0, "orders")
	if len(after) != 6 || !led(after, code) {
		t.Fatalf("right after growing, on the answering broker: %v %d, want 6 partitions with leaders", after, code)
	}
	for p, l := range before {
		if after[p] != l {
			t.Errorf("partition %d moved from %d to %d", p, l, after[p])
		}
	}
	for _, bad := range []struct {
		set  int
		want error
	}{{6, kerr.InvalidPartitions}, {3, kerr.InvalidPartitions}, {10001, kerr.InvalidPartitions}} {
		r, err := adm.UpdatePartitions(ctx, bad.set, "orders")
		if err != nil || !errors.Is(r["orders"].Err, bad.want) {
			t.Errorf("set partitions to %d: %+v %v, want %v", bad.set, r, err, bad.want)
		}
	}
	if r, err := adm.CreatePartitions(ctx, 1, "missing"); err != nil || !errors.Is(r["missing"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("grow an unknown topic: %+v %v", r, err)
	}
}

// TestDeleteTopicsByNameAndByIDRemovesTheTopicAndItsData deletes two topics, one by name and
// one by id (DeleteTopics v6), and follows each through the whole protocol: gone from Metadata
// at once, unassigned by the operator, its data on the shared volume removed by a broker (the
// fences left as the tombstone), the KafkaTopic gone.
func TestDeleteTopicsByNameAndByIDRemovesTheTopicAndItsData(t *testing.T) {
	c := newCluster(t, 2, nil)
	ctx := testCtx(t)
	adm := c.kadm()
	ids := map[string][16]byte{}
	for _, name := range []string{"by-name", "by-id", "kept"} {
		r, err := adm.CreateTopic(ctx, 2, 1, nil, name)
		if err != nil {
			t.Fatal(err)
		}
		ids[name] = r.ID
	}
	// Real partition data: one record into every partition, written by its leader.
	clusterID := c.ClusterID()
	producer := c.Kgo(kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dirs := map[string]string{}
	for name, id := range ids {
		dirs[name] = filepath.Dir(storage.PartitionDir(c.DataDir, clusterID, name, id, 0))
		for p := range int32(2) {
			if err := producer.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: p, Value: []byte("data")}).FirstErr(); err != nil {
				t.Fatalf("produce to %s/%d: %v", name, p, err)
			}
			if _, err := os.Stat(storage.PartitionDir(c.DataDir, clusterID, name, id, p)); err != nil {
				t.Fatalf("%s/%d has no data directory after a produce: %v", name, p, err)
			}
		}
	}

	if r, err := adm.DeleteTopic(ctx, "by-name"); err != nil {
		t.Fatalf("delete by name: %v (%s)", err, r.ErrMessage)
	}
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 5000
	byID := kmsg.NewDeleteTopicsRequestTopic()
	byID.TopicID = ids["by-id"]
	req.Topics = []kmsg.DeleteTopicsRequestTopic{byID}
	resp, err := req.RequestWith(ctx, c.Kgo())
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "by-id" {
		t.Fatalf("delete by id: %+v %v", resp, err)
	}
	// The broker that answered (the controller, broker 0) stopped serving both at once; the
	// other one follows as soon as its view does.
	if names := c.topicsOn(ctx, 0); len(names) != 1 || names[0] != "kept" {
		t.Errorf("topics on the answering broker right after the deletes: %v, want only kept", names)
	}
	eventually(t, "every broker to stop serving the deleted topics", func() bool {
		listed, err := adm.ListTopics(ctx)
		return err == nil && len(listed.Names()) == 1
	})
	for _, name := range []string{"by-name", "by-id"} {
		eventually(t, name+"'s KafkaTopic to go", func() bool { return c.topicObject(name) == nil })
		// Its data is gone; each partition keeps only its fence, at the tombstone epoch, so a
		// leader whose view lags the deletion can never write there again
		// (docs/storage.md "Deleting a topic").
		for p := range int32(2) {
			pdir := storage.PartitionDir(c.DataDir, clusterID, name, ids[name], p)
			if ents, err := os.ReadDir(pdir); err != nil || len(ents) != 1 || ents[0].Name() != "fence" {
				t.Errorf("%s/%d's directory after the deletion: %v (%v), want only its fence", name, p, ents, err)
			}
			f, err := storage.OpenFence(storage.OSFS{}, filepath.Join(pdir, "fence"))
			if err != nil {
				t.Fatal(err)
			}
			if e, err := f.Epoch(); err != nil || e != storage.TombstoneEpoch {
				t.Errorf("%s/%d's fence after the deletion: %d (%v), want the tombstone", name, p, e, err)
			}
		}
	}
	if _, err := os.Stat(dirs["kept"]); err != nil {
		t.Errorf("the kept topic's data: %v", err)
	}

	// Deleting what is not there.
	again, err := adm.DeleteTopics(ctx, "by-name")
	if err != nil || !errors.Is(again["by-name"].Err, kerr.UnknownTopicOrPartition) {
		t.Errorf("delete a deleted topic: %+v %v, want UNKNOWN_TOPIC_OR_PARTITION", again, err)
	}
	resp, err = req.RequestWith(ctx, c.Kgo())
	if err != nil || resp.Topics[0].ErrorCode != kerr.UnknownTopicID.Code {
		t.Errorf("delete a deleted id: %+v %v, want UNKNOWN_TOPIC_ID", resp, err)
	}
	both := kmsg.NewDeleteTopicsRequestTopic()
	both.Topic, both.TopicID = ptrString("kept"), ids["kept"]
	req.Topics = []kmsg.DeleteTopicsRequestTopic{both}
	if resp, err = req.RequestWith(ctx, c.Kgo()); err != nil || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("delete naming both name and id: %+v %v, want INVALID_REQUEST", resp, err)
	}

	// A topic re-created under a deleted name gets a new id, hence a new directory.
	r, err := adm.CreateTopic(ctx, 1, 1, nil, "by-name")
	if err != nil || r.ID == ids["by-name"] {
		t.Errorf("re-created by-name: id %s (was %s), err %v", b64(r.ID), b64(ids["by-name"]), err)
	}
}

func TestDeleteTopicsHonoursDeleteTopicEnable(t *testing.T) {
	c := newCluster(t, 1, map[string]string{"delete.topic.enable": "false"})
	ctx := testCtx(t)
	adm := c.kadm()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	r, err := adm.DeleteTopics(ctx, "orders")
	if err != nil || !errors.Is(r["orders"].Err, kerr.TopicDeletionDisabled) {
		t.Errorf("delete with delete.topic.enable=false: %+v %v, want TOPIC_DELETION_DISABLED", r, err)
	}
	if c.topicObject("orders") == nil {
		t.Error("the topic was deleted")
	}
}

func ptrString(s string) *string { return &s }

func b64(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
