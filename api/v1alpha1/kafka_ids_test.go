package v1alpha1

import (
	"bytes"
	"testing"
)

func TestKafkaUUIDRoundTripsAsKafkaPrintsIt(t *testing.T) {
	for _, tc := range []struct {
		rule    string
		in      string
		want    KafkaUUID
		wantErr bool
		canon   string // String of the parsed id; in when empty
	}{
		{rule: "22 characters of unpadded base64url are 16 bytes", in: "AAECAwQFBgcICQoLDA0ODw", want: KafkaUUID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{rule: "the URL alphabet: - and _, never + and /", in: "-_-_-_-_-_-_-_-_-_-_-w", want: KafkaUUID{0xfb, 0xff, 0xbf, 0xfb, 0xff, 0xbf, 0xfb, 0xff, 0xbf, 0xfb, 0xff, 0xbf, 0xfb, 0xff, 0xbf, 0xfb}},
		{rule: "padding is accepted, and dropped when written", in: "AAECAwQFBgcICQoLDA0ODw==", want: KafkaUUID{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, canon: "AAECAwQFBgcICQoLDA0ODw"},
		{rule: "the zero id is all A's", in: "AAAAAAAAAAAAAAAAAAAAAA", want: KafkaUUID{}},
		{rule: "the standard alphabet is refused", in: "+/+/+/+/+/+/+/+/+/+/+w", wantErr: true},
		{rule: "fewer than 16 bytes is refused", in: "AAECAwQFBgcICQoLDA0O", wantErr: true},
		{rule: "more than 16 bytes is refused", in: "AAECAwQFBgcICQoLDA0ODxA", wantErr: true},
		{rule: "the empty string (not minted yet) is refused", in: "", wantErr: true},
	} {
		t.Run(tc.rule, func(t *testing.T) {
			got, err := ParseKafkaUUID(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseKafkaUUID(%q) error %v, want error %v", tc.in, err, tc.wantErr)
			}
			if tc.wantErr {
				if !got.IsZero() {
					t.Fatalf("a refused id parsed to %v, want the zero id", got)
				}
				return
			}
			canon := tc.canon
			if canon == "" {
				canon = tc.in
			}
			if got != tc.want || got.String() != canon {
				t.Fatalf("ParseKafkaUUID(%q) = %v (%s), want %v (%s)", tc.in, got, got.String(), tc.want, canon)
			}
		})
	}
}

func TestKafkaNameIsTheTopicNameElseTheObjectName(t *testing.T) {
	kt := &KafkaTopic{}
	kt.Name = "orders-object"
	if got := kt.KafkaName(); got != "orders-object" {
		t.Fatalf("without spec.topicName: %q", got)
	}
	kt.Spec.TopicName = "Orders.v1"
	if got := kt.KafkaName(); got != "Orders.v1" {
		t.Fatalf("with spec.topicName: %q", got)
	}
}

func TestATopicIDIsSixteenRandomBytesNeverZero(t *testing.T) {
	random := bytes.NewReader(append(make([]byte, 16), bytes.Repeat([]byte{0xfb}, 16)...))
	id, err := NewKafkaUUID(random)
	if err != nil {
		t.Fatal(err)
	}
	if id.String() != "-_v7-_v7-_v7-_v7-_v7-w" {
		t.Errorf("id %s, want the second (non-zero) 16 bytes as unpadded base64url", id)
	}
	if _, err := NewKafkaUUID(bytes.NewReader(nil)); err == nil {
		t.Error("an exhausted random source must fail, not mint")
	}
}
