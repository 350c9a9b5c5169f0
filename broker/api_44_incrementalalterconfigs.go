package broker

import (
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// IncrementalAlterConfigs (key 44): versions 0-1, Apache 3.7's (docs/topics.md, "Admin APIs
// (broker)"): changes single keys of a topic's config, on the current KafkaTopic
// (topic_config.go).
//
// Behaviour:
//   - Ops: SET (0) sets a value, DELETE (1) removes the key (back to its default), APPEND (2)
//     and SUBTRACT (3) add or remove items of a list key, starting from its current effective
//     value.
//   - Errors per resource, besides those of AlterConfigs (api_33_alterconfigs.go): a key
//     named twice → INVALID_REQUEST; an unknown op or a SET with a null value →
//     INVALID_REQUEST; an unknown key, APPEND or SUBTRACT on a key that is no list, or a value
//     paddock cannot honour → INVALID_CONFIG.
//   - Only the keys the request names are checked, so an existing invalid entry (set with
//     kubectl, reported by the topic's Degraded condition) does not block other changes. The
//     rules between keys are checked on the whole result, as Apache does: a config whose
//     min.compaction.lag.ms ends above its max.compaction.lag.ms → INVALID_CONFIG.
//   - Nothing of a resource changes unless all of its ops pass.
//   - Authorization: as AlterConfigs' (ALTER_CONFIGS on the topic, or on the cluster for a
//     broker or broker-logger resource: api_33_alterconfigs.go).
func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	resources := make([]alterResource, len(req.Resources))
	for i, res := range req.Resources {
		resources[i] = alterResource{res.ResourceType, res.ResourceName, incrementalChange(res.Configs, rc.view.ConfigMap)}
	}
	for i, o := range rc.alterAll(resources, req.ValidateOnly) {
		r := kmsg.NewIncrementalAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = req.Resources[i].ResourceType, req.Resources[i].ResourceName
		r.ErrorCode, r.ErrorMessage = o.code, o.msg
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// incrementalChange applies the ops to the current config; cluster is the cluster's
// spec.config, the base of APPEND and SUBTRACT on a key the topic does not set.
func incrementalChange(ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, cluster map[string]string) configChange {
	return func(cur map[string]string) (map[string]string, *configError) {
		if cur == nil {
			cur = map[string]string{}
		}
		seen := map[string]bool{}
		for _, op := range ops {
			if seen[op.Name] {
				return nil, &configError{kerr.InvalidRequest.Code, fmt.Sprintf("Error due to duplicate config keys: %s", op.Name)}
			}
			seen[op.Name] = true
			key, known := kafkaconfig.TopicKey(op.Name)
			if !known {
				return nil, &configError{kerr.InvalidConfig.Code, kafkaconfig.CheckTopic(op.Name, "").Error()}
			}
			switch op.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				if op.Value == nil {
					return nil, &configError{kerr.InvalidRequest.Code, fmt.Sprintf("Null value not supported for SET of %s", op.Name)}
				}
				cur[op.Name] = *op.Value
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(cur, op.Name)
				continue
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				if key.Type != kafkaconfig.List {
					return nil, &configError{kerr.InvalidConfig.Code, fmt.Sprintf("Config value append or subtract is not allowed for config key %s: it is not a list", op.Name)}
				}
				cur[op.Name] = editList(currentValue(op.Name, cur, cluster), op)
			default:
				return nil, &configError{kerr.InvalidRequest.Code, fmt.Sprintf("Unknown config operation %d for %s", op.Op, op.Name)}
			}
			if err := kafkaconfig.CheckTopic(op.Name, cur[op.Name]); err != nil {
				return nil, &configError{kerr.InvalidConfig.Code, err.Error()}
			}
		}
		return cur, nil
	}
}

// currentValue is the effective value of a topic key: the topic's, else the cluster's, else
// the default (what DescribeConfigs reports).
func currentValue(name string, topic, cluster map[string]string) string {
	for _, e := range kafkaconfig.DescribeTopic(topic, cluster) {
		if e.Key.Name == name {
			return e.Value.Value
		}
	}
	return ""
}

// editList appends (APPEND) or removes (SUBTRACT) op's comma-separated items to or from list.
func editList(list string, op kmsg.IncrementalAlterConfigsRequestResourceConfig) string {
	items := kafkaconfig.SplitList(list)
	var change []string
	if op.Value != nil {
		change = kafkaconfig.SplitList(*op.Value)
	}
	for _, item := range change {
		i := slices.Index(items, item)
		switch {
		case op.Op == kmsg.IncrementalAlterConfigOpAppend && i < 0:
			items = append(items, item)
		case op.Op == kmsg.IncrementalAlterConfigOpSubtract && i >= 0:
			items = slices.Delete(items, i, i+1)
		}
	}
	return strings.Join(items, ",")
}
