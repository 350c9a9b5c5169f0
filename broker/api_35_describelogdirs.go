package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/internal/acl"
)

// DescribeLogDirs (key 35): versions 0-4, Apache 3.7's (docs/dataplane.md, "DescribeLogDirs:
// one shared volume").
//
// Behaviour:
//   - One log directory: the broker's data directory, the cluster's one shared volume. Every
//     broker names the same directory and the same volume figures; each lists only the
//     partitions it leads and serves (only the leader holds a partition's files open, and
//     there are no follower replicas), so the brokers' answers together cover each served
//     partition once.
//   - Topics null: every topic; otherwise the named partitions that are led here (others,
//     and unknown topics, are left out, as Apache leaves out replicas it does not host).
//   - A partition's size is the bytes of its record batches (closed segments and the active
//     one, up to each segment's end); OffsetLag is 0 (the leader is its own high watermark
//     source); IsFuture is false (no AlterReplicaLogDirs).
//   - The directory's error is KAFKA_STORAGE_ERROR while the volume probe fails.
//   - A broker without a data directory (no data plane) answers no directory.
//   - Authorization (Apache's handleDescribeLogDirsRequest): DESCRIBE on the cluster, else no
//     directory and the top-level error (v3+) CLUSTER_AUTHORIZATION_FAILED.
//
// Version notes:
//   - v3: a top-level error code (always NONE here).
//   - v4: the volume's TotalBytes and UsableBytes (statfs), -1 when they cannot be read.
func init() { register(35, 0, 4, handleDescribeLogDirs) }

func handleDescribeLogDirs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	if !rc.allowedCluster(acl.OpDescribe) {
		resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		return resp, nil
	}
	p := rc.h.Partitions
	if p == nil || p.cfg.DataDir == "" {
		return resp, nil
	}
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = p.cfg.DataDir
	if !p.StorageHealthy() {
		dir.ErrorCode = kerr.KafkaStorageError.Code
	}
	if sp, err := storage.VolumeSpace(p.cfg.DataDir); err == nil {
		dir.TotalBytes, dir.UsableBytes = sp.Total, sp.Usable
	}
	if req.Topics == nil {
		for i := range rc.view.Topics {
			t := &rc.view.Topics[i]
			if dt, ok := rc.logDirTopic(t, nil); ok {
				dir.Topics = append(dir.Topics, dt)
			}
		}
	} else {
		for _, rt := range req.Topics {
			if t, known := rc.view.Topic(rt.Topic); known {
				if dt, ok := rc.logDirTopic(t, rt.Partitions); ok {
					dir.Topics = append(dir.Topics, dt)
				}
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	return resp, nil
}

// logDirTopic lists the partitions of t (those named, or all when nil) this broker serves,
// with their sizes; false when there are none.
func (rc *requestContext) logDirTopic(t *cluster.Topic, named []int32) (kmsg.DescribeLogDirsResponseDirTopic, bool) {
	out := kmsg.NewDescribeLogDirsResponseDirTopic()
	out.Topic = t.Name
	add := func(index int32) {
		sp := rc.partition(t, index, -1)
		if sp.code != 0 {
			return
		}
		size, err := sp.log.Size()
		if err != nil {
			return // relinquished since the lookup: no longer led here
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = index, size
		out.Partitions = append(out.Partitions, dp)
	}
	if named == nil {
		for _, part := range t.Partitions {
			add(part.Index)
		}
	} else {
		seen := map[int32]bool{}
		for _, index := range named {
			if !seen[index] {
				seen[index] = true
				add(index)
			}
		}
	}
	return out, len(out.Partitions) > 0
}
