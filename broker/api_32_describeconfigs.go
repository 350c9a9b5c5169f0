package broker

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/acl"
	"github.com/paddock-dev/paddock/internal/kafkaconfig"
	"github.com/paddock-dev/paddock/internal/topicname"
)

// DescribeConfigs (key 32): versions 0-4, Apache 3.7's (docs/topics.md, "Admin APIs
// (broker)"), answered from the view with internal/kafkaconfig's table.
//
// Behaviour:
//   - TOPIC: every topic key, the KafkaTopic's valid spec.config values
//     (DYNAMIC_TOPIC_CONFIG) over the cluster's through the key's broker synonyms
//     (DYNAMIC_DEFAULT_BROKER_CONFIG: the KafkaCluster's spec.config applies to every broker
//     and changes at run time) over Apache's defaults (DEFAULT_CONFIG); an invalid name →
//     INVALID_TOPIC_EXCEPTION, an unknown topic → UNKNOWN_TOPIC_OR_PARTITION.
//   - BROKER "": the cluster-wide configs that are set; BROKER <this broker's id>: every broker
//     key (broker.id read-only, STATIC_BROKER_CONFIG); another id or a non-number →
//     INVALID_REQUEST, as in Apache.
//   - BROKER_LOGGER <this id>: no loggers (paddock's log level is a flag). Other types →
//     INVALID_REQUEST.
//   - ConfigNames filters the keys; null or empty means all, and unknown names are left out.
//   - Entries are never sensitive; synonyms come in precedence order, when asked.
//   - Authorization (Apache's handleDescribeConfigsRequest), first: a topic needs
//     DESCRIBE_CONFIGS on it, else TOPIC_AUTHORIZATION_FAILED; a broker or broker-logger
//     resource DESCRIBE_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED; no
//     entries either way.
//
// Version notes:
//   - v0: IsDefault instead of a source; v1: every value's source and, when asked, synonyms.
//   - v3: config types, and documentation when asked.
func init() { register(32, 0, 4, handleDescribeConfigs) }

func handleDescribeConfigs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	for _, res := range req.Resources {
		r := kmsg.NewDescribeConfigsResponseResource()
		r.ResourceType, r.ResourceName = res.ResourceType, res.ResourceName
		entries, code, msg := rc.describe(res)
		if code != 0 {
			r.ErrorCode, r.ErrorMessage = code, &msg
		}
		for _, e := range entries {
			if len(res.ConfigNames) > 0 && !slices.Contains(res.ConfigNames, e.Key.Name) {
				continue
			}
			r.Configs = append(r.Configs, describedConfig(e, req.IncludeSynonyms, req.IncludeDocumentation))
		}
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// describe is the entries of one resource, or its error.
func (rc *requestContext) describe(res kmsg.DescribeConfigsRequestResource) ([]kafkaconfig.Entry, int16, string) {
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic, kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if res.ResourceType == kmsg.ConfigResourceTypeTopic && !rc.allowedTopic(acl.OpDescribeConfigs, res.ResourceName) {
			return nil, kerr.TopicAuthorizationFailed.Code, msgTopicAuthorizationFailed
		}
		if res.ResourceType != kmsg.ConfigResourceTypeTopic && !rc.allowedCluster(acl.OpDescribeConfigs) {
			return nil, kerr.ClusterAuthorizationFailed.Code, msgClusterAuthorizationFailed
		}
	}
	switch res.ResourceType {
	case kmsg.ConfigResourceTypeTopic:
		if err := topicname.Validate(res.ResourceName); err != nil {
			return nil, kerr.InvalidTopicException.Code, err.Error()
		}
		if res.ResourceName == topicname.ConsumerOffsets {
			return offsetsTopicConfigs(rc.view.ConfigMap), 0, ""
		}
		t, ok := rc.view.Topic(res.ResourceName)
		if !ok {
			return nil, kerr.UnknownTopicOrPartition.Code, "This server does not host this topic-partition."
		}
		return kafkaconfig.DescribeTopic(t.ConfigMap, rc.view.ConfigMap), 0, ""
	case kmsg.ConfigResourceTypeBroker:
		if res.ResourceName == "" {
			return kafkaconfig.DescribeClusterDefaults(rc.view.ConfigMap), 0, ""
		}
		if msg, ok := rc.isSelf(res.ResourceName); !ok {
			return nil, kerr.InvalidRequest.Code, msg
		}
		return kafkaconfig.DescribeBroker(rc.self, rc.view.ConfigMap, rc.h.StaticConfig), 0, ""
	case kmsg.ConfigResourceTypeBrokerLogger:
		if msg, ok := rc.isSelf(res.ResourceName); !ok {
			return nil, kerr.InvalidRequest.Code, msg
		}
		return nil, 0, ""
	}
	return nil, kerr.InvalidRequest.Code, fmt.Sprintf("Unsupported resource type: %d", res.ResourceType)
}

// isSelf checks that a broker resource names this broker; otherwise it returns Apache's
// message for the refusal.
func (rc *requestContext) isSelf(name string) (string, bool) {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || int32(id) != rc.self {
		return fmt.Sprintf("Unexpected broker id, expected %d or empty string, but received %s", rc.self, name), false
	}
	return "", true
}

// describedConfig is one entry on the wire.
func describedConfig(e kafkaconfig.Entry, synonyms, docs bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name, c.Value = e.Key.Name, valuePtr(e.Value)
	c.ReadOnly = e.Key.ReadOnly
	c.Source = kmsg.ConfigSource(e.Value.Source)
	c.IsDefault = e.Value.Source == kafkaconfig.SourceDefault
	c.ConfigType = kmsg.ConfigType(e.Key.Type)
	if docs {
		c.Documentation = strptr(e.Key.Doc)
	}
	if synonyms {
		for _, s := range e.Synonyms {
			cs := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			cs.Name, cs.Value, cs.Source = s.Name, valuePtr(s), kmsg.ConfigSource(s.Source)
			c.ConfigSynonyms = append(c.ConfigSynonyms, cs)
		}
	}
	return c
}

func valuePtr(v kafkaconfig.Value) *string {
	if v.Null {
		return nil
	}
	return strptr(v.Value)
}
