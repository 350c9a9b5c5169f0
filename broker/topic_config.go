package broker

import (
	"context"
	"fmt"
	"maps"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// What AlterConfigs (33) and IncrementalAlterConfigs (44) share: both change the spec.config
// of a KafkaTopic and nothing else. Broker configs live in the KafkaCluster's spec.config,
// which the brokers may only read; they are changed with kubectl.

// configWaitMs bounds how long an alter waits for this broker's view to show the change (the
// requests carry no timeout of their own), so a DescribeConfigs right after it, here, sees it.
const configWaitMs = 5000

// errBrokerConfigs is the answer to an alter of a broker resource.
const errBrokerConfigs = "paddock's broker configs are the KafkaCluster's spec.config, which brokers only read; change them there (kubectl edit kafkacluster)"

// alterResource is one resource of an alter request and the change it asks for.
type alterResource struct {
	typ    kmsg.ConfigResourceType
	name   string
	change configChange
}

// alterOutcome is one resource's answer: 0 and nil, or an error code and message.
type alterOutcome struct {
	code int16
	msg  *string
}

// alterAll applies each resource's change (none when validateOnly) and returns the outcomes in
// request order, after waiting briefly for this broker's view to show what was written.
func (rc *requestContext) alterAll(resources []alterResource, validateOnly bool) []alterOutcome {
	write, _, cancel := rc.adminDeadlines(configWaitMs)
	defer cancel()
	key := func(r alterResource) string { return fmt.Sprint(r.typ, "/", r.name) }
	counts := countBy(resources, key)
	out := make([]alterOutcome, len(resources))
	written := map[string]int64{}
	for i, res := range resources {
		t, code, msg := rc.alterTarget(res.typ, res.name, counts[key(res)] > 1)
		if code == 0 {
			var gen int64
			gen, code, msg = rc.alterTopicConfig(write, t, validateOnly, res.change)
			if gen > 0 {
				written[t.Name] = gen
			}
		}
		if code != 0 {
			out[i] = alterOutcome{code, &msg}
		}
	}
	rc.waitForGenerations(written)
	return out
}

// alterTarget checks one resource of an alter request and returns the topic it names, or the
// error the resource answers with.
func (rc *requestContext) alterTarget(typ kmsg.ConfigResourceType, name string, duplicate bool) (*cluster.Topic, int16, string) {
	switch {
	case duplicate:
		return nil, kerr.InvalidRequest.Code, "Duplicate resource in the request."
	case (typ == kmsg.ConfigResourceTypeBroker || typ == kmsg.ConfigResourceTypeBrokerLogger) && !rc.allowedCluster(acl.OpAlterConfigs):
		return nil, kerr.ClusterAuthorizationFailed.Code, msgClusterAuthorizationFailed
	case typ == kmsg.ConfigResourceTypeTopic && !rc.allowedTopic(acl.OpAlterConfigs, name):
		return nil, kerr.TopicAuthorizationFailed.Code, msgTopicAuthorizationFailed
	case typ == kmsg.ConfigResourceTypeBroker:
		return nil, kerr.InvalidRequest.Code, errBrokerConfigs
	case typ == kmsg.ConfigResourceTypeBrokerLogger:
		return nil, kerr.InvalidRequest.Code, "paddock brokers have no loggers to configure; their log level is the --log-level flag"
	case typ != kmsg.ConfigResourceTypeTopic:
		return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Unsupported resource type: %d", typ)
	case name == topicname.ConsumerOffsets:
		return nil, kerr.PolicyViolation.Code, fmt.Sprintf(errAlterInternal, name)
	case rc.h.Admin == nil:
		return nil, kerr.UnknownServerError.Code, errNoAdmin
	}
	if err := topicname.Validate(name); err != nil {
		return nil, kerr.InvalidTopicException.Code, err.Error()
	}
	t, ok := rc.view.Topic(name)
	if !ok {
		return nil, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition."
	}
	return t, 0, ""
}

// configChange computes a topic's new spec.config from its current one; its error is a Kafka
// error code and message.
type configChange func(cur map[string]string) (map[string]string, *configError)

type configError struct {
	code int16
	msg  string
}

func (e *configError) Error() string { return e.msg }

// alterTopicConfig applies change to t's spec.config: on the view's copy only when
// validateOnly, else on the current object, written back. It returns the generation written
// (0 when nothing was) and the error code and message.
func (rc *requestContext) alterTopicConfig(ctx context.Context, t *cluster.Topic, validateOnly bool, change configChange) (int64, int16, string) {
	change = withoutConflicts(change, rc.view.ConfigMap)
	if validateOnly {
		if _, cerr := change(maps.Clone(t.ConfigMap)); cerr != nil {
			return 0, cerr.code, cerr.msg
		}
		return 0, 0, ""
	}
	kt, err := rc.h.Admin.UpdateSpec(ctx, t.Object, t.UID, func(kt *v1alpha1.KafkaTopic) error {
		next, cerr := change(maps.Clone(kt.Spec.Config))
		if cerr != nil {
			return cerr
		}
		if len(next) == 0 {
			next = nil
		}
		kt.Spec.Config = next
		return nil
	})
	if cerr, ok := err.(*configError); ok {
		return 0, cerr.code, cerr.msg
	}
	if err != nil {
		code, msg := apiErrorCode(err)
		return 0, code, fmt.Sprintf("update KafkaTopic %s of '%s': %s", t.Object, t.Name, msg)
	}
	return kt.Generation, 0, ""
}

// withoutConflicts is change refusing a result whose keys conflict on their effective values
// in a cluster whose spec.config is cluster (kafkaconfig.TopicConflicts: a min.compaction.lag.ms
// above max.compaction.lag.ms), with INVALID_CONFIG, as Apache's LogConfig.validateValues does.
func withoutConflicts(change configChange, cluster map[string]string) configChange {
	return func(cur map[string]string) (map[string]string, *configError) {
		next, cerr := change(cur)
		if cerr != nil {
			return nil, cerr
		}
		if p := kafkaconfig.TopicConflicts(next, cluster); len(p) > 0 {
			return nil, &configError{kerr.InvalidConfig.Code, kafkaconfig.Summary(p)}
		}
		return next, nil
	}
}

// waitForGenerations waits until this broker's view shows each topic (by name) at least at
// the generation written.
func (rc *requestContext) waitForGenerations(written map[string]int64) {
	if len(written) == 0 {
		return
	}
	_, wait, cancel := rc.adminDeadlines(configWaitMs)
	defer cancel()
	waitView(wait, rc.h.View, func(s *cluster.Snapshot) bool {
		for name, gen := range written {
			if t, ok := s.Topic(name); !ok || t.Generation < gen {
				return false
			}
		}
		return true
	})
}
