package broker

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions (key 18), versions 0–3.
//
// The answer lists every key in the apis table with the range its handler implements, sorted
// by key, so a client never sees a version we cannot decode. The response header is always
// v0, even for the flexible v3, because the client reads it before it knows our versions.
//
// A request newer than v3 is not decoded at all: the connection answers it with a v0 body
// carrying UNSUPPORTED_VERSION and our key-18 range (unsupportedApiVersions), and the client
// retries with a version we listed. v3's client software name/version are accepted as sent.
const apiVersionsKey = 18

func init() { register(apiVersionsKey, 0, 3, handleApiVersions) }

func handleApiVersions(_ *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = advertisedKeys()
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
