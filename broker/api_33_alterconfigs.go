package broker

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/internal/kafkaconfig"
)

// AlterConfigs (key 33): versions 0-2, Apache 3.7's (docs/topics.md, "Admin APIs (broker)"):
// the legacy alter, which replaces a topic's whole config with the given entries — keys left
// out revert to their defaults. It writes the KafkaTopic's spec.config (topic_config.go).
//
// Behaviour, per resource:
//   - A resource named twice → INVALID_REQUEST; a broker or broker-logger resource →
//     INVALID_REQUEST (broker configs are the KafkaCluster's spec.config, changed with
//     kubectl); an invalid topic name → INVALID_TOPIC_EXCEPTION; an unknown topic →
//     UNKNOWN_TOPIC_OR_PARTITION; a key given twice, a null value, an unknown key or a value
//     paddock cannot honour → INVALID_CONFIG, and nothing of that resource changes; so does a
//     new config whose effective values conflict (min.compaction.lag.ms above
//     max.compaction.lag.ms: topic_config.go withoutConflicts).
//   - ValidateOnly runs the checks and changes nothing.
//   - Authorization (Apache's handleAlterConfigsRequest), after the duplicate check: a topic
//     needs ALTER_CONFIGS on it, else TOPIC_AUTHORIZATION_FAILED; a broker or broker-logger
//     resource ALTER_CONFIGS on the cluster, else CLUSTER_AUTHORIZATION_FAILED
//     (topic_config.go alterTarget). Nothing refused changes.
//   - The answer waits briefly (configWaitMs) until this broker's view shows the change.
func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	resources := make([]alterResource, len(req.Resources))
	for i, res := range req.Resources {
		resources[i] = alterResource{res.ResourceType, res.ResourceName, replaceConfig(res.Configs)}
	}
	for i, o := range rc.alterAll(resources, req.ValidateOnly) {
		r := kmsg.NewAlterConfigsResponseResource()
		r.ResourceType, r.ResourceName = req.Resources[i].ResourceType, req.Resources[i].ResourceName
		r.ErrorCode, r.ErrorMessage = o.code, o.msg
		resp.Resources = append(resp.Resources, r)
	}
	return resp, nil
}

// replaceConfig is the legacy alter's change: the request's entries, checked, are the new
// config whatever the current one is.
func replaceConfig(entries []kmsg.AlterConfigsRequestResourceConfig) configChange {
	return func(map[string]string) (map[string]string, *configError) {
		next := map[string]string{}
		for _, e := range entries {
			if _, dup := next[e.Name]; dup {
				return nil, &configError{kerr.InvalidConfig.Code, fmt.Sprintf("Config %s is given twice", e.Name)}
			}
			if e.Value == nil {
				return nil, &configError{kerr.InvalidConfig.Code, fmt.Sprintf("Null value not supported for topic configs: %s", e.Name)}
			}
			if err := kafkaconfig.CheckTopic(e.Name, *e.Value); err != nil {
				return nil, &configError{kerr.InvalidConfig.Code, err.Error()}
			}
			next[e.Name] = *e.Value
		}
		return next, nil
	}
}
