package broker

import (
	"errors"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/paddock-dev/paddock/broker/wire"
)

// ApiVersions (key 18): versions 0-4, Apache 4.0's (docs/wire.md, "Connections"). Every
// ApiVersions rule lives in this file.
//
// Behaviour:
//
//   - The answer lists every key of the apis table with the range its handler implements,
//     sorted by key, so a client never sees a version the broker cannot decode.
//
//   - The response header is always v0, even for the flexible v3, because the client reads
//     it before it knows our versions (responseHeaderTagged).
//
//   - A request newer than v3 is not decoded at all: it is answered with a v0 body carrying
//     UNSUPPORTED_VERSION and our key-18 range (apiVersionsFallback), and the client retries
//     with a version we listed. Any other key with a version outside its range closes the
//     connection.
//
//   - Features (v3+), as Apache 4.0 has them for the consumer group protocol (KIP-848):
//     group.version is supported at levels 0-1 and finalized at 1 while the group
//     coordinator serves the protocol (group.coordinator.rebalance.protocols lists
//     "consumer"), at 0 — left out, as Apache leaves out level-0 features — otherwise; the
//     finalized features' epoch is the view's coordinator epoch (a broker's coordinator reads
//     the setting when it starts, and a restart bumps that epoch). No other feature is
//     advertised: paddock has no metadata log (metadata.version, kraft.version) and no
//     transactions yet (transaction.version).
//
// Version notes:
//   - v3: the client software name and version are accepted as sent. SupportedFeatures
//     leaves out features whose minimum level is 0 (group.version), as Apache 4.0 does below
//     v4 (older clients cannot read a minimum of 0).
//   - v4: SupportedFeatures lists group.version 0-1.
const apiVersionsKey = 18

func init() { register(apiVersionsKey, 0, 4, handleApiVersions) }

// groupVersionFeature is the feature flag of the consumer group protocol (Apache 4.0's
// GroupVersion: level 1 enables KIP-848).
const groupVersionFeature = "group.version"

func handleApiVersions(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = advertisedKeys()
	if req.Version >= 4 {
		resp.SupportedFeatures = []kmsg.ApiVersionsResponseSupportedFeature{{Name: groupVersionFeature, MinVersion: 0, MaxVersion: 1}}
	}
	if req.Version >= 3 {
		resp.FinalizedFeaturesEpoch = max(rc.view.CoordinatorEpoch, 0)
		if rc.coordinator().ConsumerProtocolEnabled() {
			resp.FinalizedFeatures = []kmsg.ApiVersionsResponseFinalizedFeature{{Name: groupVersionFeature, MinVersionLevel: 1, MaxVersionLevel: 1}}
		}
	}
	return resp, nil
}

// advertisedKeys is the apis table as ApiVersions keys, sorted by key.
func advertisedKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b kmsg.ApiVersionsResponseApiKey) int { return int(a.ApiKey) - int(b.ApiKey) })
	return keys
}

// servedAPIs names every key of the apis table with its range ("Metadata 0-12"), sorted by
// key: what `paddock broker --help` lists.
func servedAPIs() []string {
	keys := advertisedKeys()
	out := make([]string, len(keys))
	for i, k := range keys {
		r := strconv.Itoa(int(k.MinVersion))
		if k.MaxVersion != k.MinVersion {
			r += "-" + strconv.Itoa(int(k.MaxVersion))
		}
		out[i] = kmsg.NameForKey(k.ApiKey) + " " + r
	}
	return out
}

// apiVersionsFallback is the answer to a request decodeRequest refused with err, when that
// request is an ApiVersions newer than ours: ok is false for every other refusal, which
// closes the connection.
func apiVersionsFallback(h wire.Header, err error) (resp kmsg.Response, ok bool) {
	if !errors.Is(err, errVersionRange) || h.Key != apiVersionsKey || h.Version <= apis[apiVersionsKey].max {
		return nil, false
	}
	return unsupportedApiVersions(), true
}

// responseHeaderTagged reports whether resp's response header (v1) carries a tagged-field
// section: flexible responses do, except ApiVersions, whose header is always v0.
func responseHeaderTagged(resp kmsg.Response) bool {
	return resp.IsFlexible() && resp.Key() != apiVersionsKey
}

// unsupportedApiVersions is the answer to an ApiVersions request above our max: a v0 body
// (the only one every client can read) with UNSUPPORTED_VERSION and the key-18 range.
func unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	a := apis[apiVersionsKey]
	k := kmsg.NewApiVersionsResponseApiKey()
	k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{k}
	return resp
}
