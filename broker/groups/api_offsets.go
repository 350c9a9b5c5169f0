package groups

import (
	"cmp"
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit (key 8) v0–9. Partitions of topics the broker does not know (or beyond their
// partition count) answer UNKNOWN_TOPIC_OR_PARTITION before the group is asked, as Apache's
// KafkaApis does; the rest are committed together, durably, and acknowledged only while this
// coordinator's fence holds. v0 (ZooKeeper offsets) answers UNSUPPORTED_VERSION, as KRaft
// Apache does despite advertising it; v1 may carry a commit timestamp; v2–4 carry a retention
// time, which (unless -1) makes the offsets expire that long after the commit instead of by
// offsets.retention.minutes (docs/groups.md "Offset retention"); v6+ carry the committed
// leader epoch; v7+ the instance id. In a consumer-protocol group the generation is the
// member epoch (STALE_MEMBER_EPOCH when it is not the member's), and its members must commit
// with v9+ (UNSUPPORTED_VERSION below). An empty group id is allowed.
func (c *Coordinator) OffsetCommit(ctx context.Context, req *kmsg.OffsetCommitRequest) (*kmsg.OffsetCommitResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	codes, slots, ids := c.knownPartitions(len(req.Topics),
		func(t int) (string, int) { return req.Topics[t].Topic, len(req.Topics[t].Partitions) },
		func(t, p int) int32 { return req.Topics[t].Partitions[p].Partition })
	now := c.clock.Now().UnixMilli()
	entries := make([]commitEntry, 0, len(slots))
	for _, sl := range slots {
		t := req.Topics[sl.t]
		p := t.Partitions[sl.p]
		e := commitEntry{offsetEntry: offsetEntry{
			tp:        tp{topic: t.Topic, partition: p.Partition},
			committed: committed{topicID: ids[t.Topic], offset: p.Offset, leaderEpoch: -1, commitMs: now},
		}}
		if p.Metadata != nil {
			e.metadata = *p.Metadata
		}
		if req.Version >= 6 {
			e.leaderEpoch = p.LeaderEpoch
		}
		if req.Version == 1 && p.Timestamp != -1 {
			e.commitMs = p.Timestamp
		}
		if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
			e.expireMs = max(now+req.RetentionTimeMillis, 1) // 0 means "no expiry of its own"
		}
		e.tooLarge = javaLength(e.metadata) > c.cfg.MaxMetadataSize
		entries = append(entries, e)
	}
	if len(entries) > 0 {
		var results []int16
		switch req.Version {
		case 0:
			for ti := range codes {
				for pi := range codes[ti] {
					codes[ti][pi] = kerr.UnsupportedVersion.Code
				}
			}
		default:
			a := commitArgs{version: req.Version, generation: req.Generation, memberID: req.MemberID, entries: entries}
			if req.Version >= 7 && req.InstanceID != nil {
				a.instanceID = strp(*req.InstanceID)
			}
			var err error
			results, err = do(ctx, c, req.Group,
				func(g *group, w *waiter[[]int16]) { w.send(g.handleCommit(a)) },
				func(code int16) []int16 { return fill(len(entries), code) })
			if err != nil {
				return nil, err
			}
			for i, s := range slots {
				codes[s.t][s.p] = results[i]
			}
		}
	}
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for ti, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for pi, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, codes[ti][pi]
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// slot is one requested partition: its topic's index in the request and its own.
type slot struct{ t, p int }

// knownPartitions checks requested partitions against the broker's topics, as Apache's
// KafkaApis does before asking the coordinator: partitions of unknown topics, or beyond their
// partition count, are UNKNOWN_TOPIC_OR_PARTITION in codes; the others are returned in request
// order, with their topics' ids.
func (c *Coordinator) knownPartitions(topics int, topic func(t int) (name string, parts int), partition func(t, p int) int32) (codes [][]int16, known []slot, ids map[string][16]byte) {
	codes = make([][]int16, topics)
	ids = map[string][16]byte{}
	for t := range topics {
		name, n := topic(t)
		codes[t] = make([]int16, n)
		id, count, ok := c.cfg.Topics.Topic(name)
		ids[name] = id
		for p := range n {
			if idx := partition(t, p); !ok || idx < 0 || idx >= count {
				codes[t][p] = kerr.UnknownTopicOrPartition.Code
				continue
			}
			known = append(known, slot{t, p})
		}
	}
	return codes, known, ids
}

func fill(n int, code int16) []int16 {
	out := make([]int16, n)
	for i := range out {
		out[i] = code
	}
	return out
}

// javaLength is Java's String.length: UTF-16 code units (Apache checks the metadata size so).
func javaLength(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// OffsetFetch (key 9) v0–9. An unknown group or partition answers offset -1 with no error;
// v2+ null Topics means every partition the group committed; v0–1 have no top-level error,
// so a group error is copied into each requested partition; v2–7 answer it at the top; v5+
// carry the committed leader epoch; v7+ RequireStable answers UNSTABLE_OFFSET_COMMIT for a
// partition with pending transactional offsets (without it, the last committed offset is
// answered, as always); v8+ fetch several groups,
// each answered on its own; v9+ may name a consumer-protocol member and its epoch, checked
// (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH) in a consumer group. v0 answers UNSUPPORTED_VERSION,
// as KRaft Apache does. An empty group id is allowed.
func (c *Coordinator) OffsetFetch(ctx context.Context, req *kmsg.OffsetFetchRequest) (*kmsg.OffsetFetchResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			a := fetchArgs{all: rg.Topics == nil, memberID: clonePtr(rg.MemberID), memberEpoch: -1, requireStable: req.RequireStable}
			if req.Version >= 9 {
				a.memberEpoch = rg.MemberEpoch
			}
			for _, t := range rg.Topics {
				for _, p := range t.Partitions {
					a.parts = append(a.parts, tp{topic: t.Topic, partition: p})
				}
			}
			res, code, err := c.fetch(ctx, rg.Group, a)
			if err != nil {
				return nil, err
			}
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = rg.Group, code
			if code == 0 {
				for _, t := range byTopic(res.parts) {
					gt := kmsg.NewOffsetFetchResponseGroupTopic()
					gt.Topic = t[0].topic
					for _, p := range t {
						gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
						gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.partition, p.offset, p.leaderEpoch, strp(p.metadata), p.code
						gt.Partitions = append(gt.Partitions, gp)
					}
					g.Topics = append(g.Topics, gt)
				}
			}
			resp.Groups = append(resp.Groups, g)
		}
		return resp, nil
	}
	a := fetchArgs{all: req.Version >= 2 && req.Topics == nil, memberEpoch: -1, requireStable: req.Version >= 7 && req.RequireStable}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			a.parts = append(a.parts, tp{topic: t.Topic, partition: p})
		}
	}
	var res fetchResult
	var code int16
	if req.Version == 0 {
		code = kerr.UnsupportedVersion.Code
	} else {
		var err error
		if res, code, err = c.fetch(ctx, req.Group, a); err != nil {
			return nil, err
		}
	}
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp, nil
		}
		res = fetchResult{parts: make([]fetchPart, len(a.parts))}
		for i, p := range a.parts {
			res.parts[i] = fetchPart{tp: p, offset: -1, leaderEpoch: -1}
		}
	}
	for _, t := range byTopic(res.parts) {
		rt := kmsg.NewOffsetFetchResponseTopic()
		rt.Topic = t[0].topic
		for _, p := range t {
			rp := kmsg.NewOffsetFetchResponseTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.partition, p.offset, p.leaderEpoch, strp(p.metadata), cmp.Or(code, p.code)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func (c *Coordinator) fetch(ctx context.Context, id string, a fetchArgs) (fetchResult, int16, error) {
	res, err := do(ctx, c, id,
		func(g *group, w *waiter[fetchResult]) { w.send(g.handleFetch(a)) },
		func(code int16) fetchResult { return fetchResult{code: code} })
	return res, res.code, err
}

// byTopic splits parts into runs of one topic, keeping their order.
func byTopic(parts []fetchPart) [][]fetchPart {
	var out [][]fetchPart
	index := map[string]int{}
	for _, p := range parts {
		i, ok := index[p.topic]
		if !ok {
			i = len(out)
			index[p.topic] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// OffsetDelete (key 47) v0. Unknown topics or partitions answer UNKNOWN_TOPIC_OR_PARTITION; a
// group-level error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, not coordinator, ...) is answered
// alone, at the top.
func (c *Coordinator) OffsetDelete(ctx context.Context, req *kmsg.OffsetDeleteRequest) (*kmsg.OffsetDeleteResponse, error) {
	if err := checkVersion(req); err != nil {
		return nil, err
	}
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp, nil
	}
	codes, slots, _ := c.knownPartitions(len(req.Topics),
		func(t int) (string, int) { return req.Topics[t].Topic, len(req.Topics[t].Partitions) },
		func(t, p int) int32 { return req.Topics[t].Partitions[p].Partition })
	parts := make([]tp, len(slots))
	for i, sl := range slots {
		parts[i] = tp{topic: req.Topics[sl.t].Topic, partition: req.Topics[sl.t].Partitions[sl.p].Partition}
	}
	type result struct {
		code  int16
		codes []int16
	}
	res, err := do(ctx, c, req.Group,
		func(g *group, w *waiter[result]) {
			code, codes := g.handleOffsetDelete(parts)
			w.send(result{code, codes})
		},
		func(code int16) result { return result{code: code} })
	if err != nil {
		return nil, err
	}
	if res.code != 0 {
		resp.ErrorCode = res.code
		return resp, nil
	}
	for i, s := range slots {
		codes[s.t][s.p] = res.codes[i]
	}
	for ti, t := range req.Topics {
		rt := kmsg.OffsetDeleteResponseTopic{Topic: t.Topic}
		for pi, p := range t.Partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: p.Partition, ErrorCode: codes[ti][pi]})
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}
