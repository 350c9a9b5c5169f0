package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/cluster"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/txn"
	"github.com/paddock-dev/paddock/internal/acl"
)

// How transaction markers are written (docs/transactions.md, "Markers on the wire"): the
// coordinator's driver hands each leader its partitions' markers (txn.MarkerWriter). Markers
// for partitions this broker leads are written here directly; the others go to their leader
// as a WriteTxnMarkers request over an internal listener, answered by handleWriteTxnMarkers.
// Either way each marker is written by writeMarker under the leader's fence.

// maxParallelMarkers bounds the partitions one WriteTxnMarkers (or one local batch) writes
// at once: each waits for its log's group commit.
const maxParallelMarkers = 16

// writeMarker writes m on this broker, as the leader of its partition: a data partition's
// control batch (storage.Log.AppendMarker, acks=all under the fence), or, for a partition of
// __consumer_offsets, the completion of the pending transactional offsets of the groups
// hashing to it (the group coordinator's). It returns m's Kafka code; the codes a
// coordinator retries (txn's markerOutcome) are the ones that mean "not here, not now".
func (h *Handler) writeMarker(ctx context.Context, view *cluster.Snapshot, m txn.Marker) int16 {
	if m.Topic == txn.OffsetsTopic {
		return h.completeTxnOffsets(ctx, view, m)
	}
	t, ok := view.Topic(m.Topic)
	if !ok {
		return kerr.UnknownTopicOrPartition.Code
	}
	rc := &requestContext{ctx: ctx, h: h, view: view, self: h.Self}
	sp := rc.partition(t, m.Partition, -1)
	if sp.code != 0 {
		return sp.code
	}
	_, err := sp.log.AppendMarker(ctx, storage.Marker{
		ProducerID: m.ProducerID, ProducerEpoch: m.ProducerEpoch, Commit: m.Commit,
		CoordinatorEpoch: m.CoordinatorEpoch, TimestampMs: m.TimestampMs,
	}, storage.AcksAll)
	if err != nil && !errors.Is(err, storage.ErrInvalidProducerEpoch) && !errors.Is(err, storage.ErrTransactionCoordinatorFenced) {
		h.Log.V(1).Info("Transaction marker not written", "topic", m.Topic, "partition", m.Partition,
			"producerID", m.ProducerID, "err", err.Error())
	}
	return storageCode(err)
}

// completeTxnOffsets is writeMarker for a partition of __consumer_offsets: the group
// coordinator applies (commit) or drops (abort) the producer's pending offsets of the groups
// of that partition, durably, before NONE (groups.Coordinator.CompleteTransaction). Without
// a running group coordinator the marker is answered NOT_LEADER_OR_FOLLOWER, which the
// transaction coordinator resends: the decision stays durable and is never reported done.
func (h *Handler) completeTxnOffsets(ctx context.Context, _ *cluster.Snapshot, m txn.Marker) int16 {
	c := h.Groups.Coordinator()
	if c == nil {
		return kerr.NotLeaderForPartition.Code
	}
	return c.CompleteTransaction(ctx, m.Partition, m.ProducerID, m.ProducerEpoch, m.Commit)
}

// writeMarkers writes ms on this broker, in parallel, and returns their codes in order.
func (h *Handler) writeMarkers(ctx context.Context, view *cluster.Snapshot, ms []txn.Marker) []int16 {
	codes := make([]int16, len(ms))
	sem := make(chan struct{}, maxParallelMarkers)
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			codes[i] = h.writeMarker(ctx, view, m)
		}()
	}
	wg.Wait()
	return codes
}

// WriteTxnMarkers (key 27): versions 0-1, Apache 3.7's (handleWriteTxnMarkersRequest).
//
// Behaviour:
//   - Sent by a transaction coordinator to a partition's leader: each entry's partitions get
//     a control batch (COMMIT or ABORT) for the producer at its epoch, with the coordinator
//     epoch; __consumer_offsets partitions complete the group coordinator's pending offsets.
//     Every marker is durable (acks=all) and fence-checked before its code is NONE.
//   - Per partition: unknown topic or partition → UNKNOWN_TOPIC_OR_PARTITION; not led here →
//     NOT_LEADER_OR_FOLLOWER; the producer's epoch moved on → INVALID_PRODUCER_EPOCH; an
//     older coordinator epoch than the partition has seen for the producer →
//     TRANSACTION_COORDINATOR_FENCED; the storage codes of Produce otherwise.
//   - Authorization: CLUSTER_ACTION on the cluster (the brokers' own principal is a super
//     user), else every partition CLUSTER_AUTHORIZATION_FAILED.
//   - The answer waits for every marker's write (answerLater), bounded by
//     txn.DefaultMarkerRequestTimeout.
func init() { register(27, 0, 1, handleWriteTxnMarkers) }

func handleWriteTxnMarkers(rc *requestContext, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	// Copy what the answer needs out of the request (answerLater: its bytes are reused).
	var ms []txn.Marker
	for _, e := range req.Markers {
		re := kmsg.NewWriteTxnMarkersResponseMarker()
		re.ProducerID = e.ProducerID
		for _, t := range e.Topics {
			rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
				ms = append(ms, txn.Marker{Topic: t.Topic, Partition: p, ProducerID: e.ProducerID,
					ProducerEpoch: e.ProducerEpoch, Commit: e.Committed, CoordinatorEpoch: e.CoordinatorEpoch,
					TimestampMs: rc.h.now().UnixMilli()})
			}
			re.Topics = append(re.Topics, rt)
		}
		resp.Markers = append(resp.Markers, re)
	}
	fill := func(codes []int16) {
		i := 0
		for m := range resp.Markers {
			for t := range resp.Markers[m].Topics {
				for p := range resp.Markers[m].Topics[t].Partitions {
					resp.Markers[m].Topics[t].Partitions[p].ErrorCode = codes[i]
					i++
				}
			}
		}
	}
	if !rc.allowedCluster(acl.OpClusterAction) {
		codes := make([]int16, len(ms))
		for i := range codes {
			codes[i] = kerr.ClusterAuthorizationFailed.Code
		}
		fill(codes)
		return resp, nil
	}
	view := rc.view
	rc.answerLater(func() (kmsg.Response, error) {
		ctx, cancel := context.WithTimeout(rc.ctx, txn.DefaultMarkerRequestTimeout)
		defer cancel()
		fill(rc.h.writeMarkers(ctx, view, ms))
		return resp, nil
	})
	return nil, nil
}

// markerSender is the broker's txn.MarkerWriter: markers for this broker's partitions are
// written here (Handler.writeMarkers); the others are sent to their leader in one
// WriteTxnMarkers request over the internal listener the brokers talk on (brokerListener),
// with the broker's own certificate when that listener is mutual TLS.
type markerSender struct {
	h        *Handler
	view     cluster.View
	listener cluster.ListenerSpec // brokerListener's choice; Name "" when there is none
	security cluster.Security     // for a TLS listener: the certificate and the cluster CAs
	log      logr.Logger

	mu      sync.Mutex
	clients map[string]*kgo.Client // by leader address; guarded by mu
	closed  bool                   // guarded by mu
}

// brokerListener is the listener brokers send each other requests on: an internal listener
// a broker can authenticate on with what it has — its own certificate. In order of
// preference: no client authentication; mutual TLS; SASL over TLS (a broker's certificate
// admits it without SASL: authn.go). A SASL listener without TLS cannot be used: SCRAM and
// PLAIN need a password no broker holds.
func brokerListener(ls []cluster.ListenerSpec) (cluster.ListenerSpec, bool) {
	rank := func(l cluster.ListenerSpec) int {
		switch {
		case l.Type != "" && l.Type != v1alpha1.ListenerInternal:
			return 0
		case l.Authentication == "":
			return 3
		case l.Authentication == v1alpha1.AuthenticationTLS && l.TLS:
			return 2
		case l.TLS:
			return 1
		}
		return 0
	}
	var best cluster.ListenerSpec
	bestRank := 0
	for _, l := range ls {
		if r := rank(l); r > bestRank {
			best, bestRank = l, r
		}
	}
	return best, bestRank > 0
}

func newMarkerSender(h *Handler, view cluster.View, listeners []cluster.ListenerSpec, sec cluster.Security, log logr.Logger) *markerSender {
	l, ok := brokerListener(listeners)
	if !ok {
		log.Info("No internal listener a broker can authenticate on (SASL without TLS needs a password no broker holds): transaction markers for partitions led by other brokers cannot be sent")
	}
	return &markerSender{h: h, view: view, listener: l, security: sec, log: log, clients: map[string]*kgo.Client{}}
}

// WriteMarkers writes ms, all led by leader, and returns a code per marker.
func (s *markerSender) WriteMarkers(ctx context.Context, leader int32, ms []txn.Marker) ([]int16, error) {
	view := s.view.Snapshot()
	if leader == s.h.Self {
		return s.h.writeMarkers(ctx, view, ms), nil
	}
	if s.listener.Name == "" {
		return nil, errors.New("no internal listener a broker can authenticate on")
	}
	row, ok := view.Row(leader)
	if !ok {
		return nil, fmt.Errorf("broker %d is not registered", leader)
	}
	addr, ok := row.Address(s.listener.Name)
	if !ok {
		return nil, fmt.Errorf("broker %d has no address on listener %s yet", leader, s.listener.Name)
	}
	cl, err := s.client(net.JoinHostPort(addr.Host, strconv.Itoa(int(addr.Port))), addr.Host)
	if err != nil {
		return nil, err
	}
	req, index := markersRequest(ms)
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("WriteTxnMarkers to broker %d: %w", leader, err)
	}
	return markerCodes(kresp.(*kmsg.WriteTxnMarkersResponse), index, len(ms)), nil
}

// markerKey names one marker in a WriteTxnMarkers answer.
type markerKey struct {
	pid       int64
	topic     string
	partition int32
}

// markersRequest groups ms into one entry per transaction decision (producer, epoch,
// result, coordinator epoch) with its partitions by topic, as Apache's marker channel
// does, and returns where each marker's answer will be.
func markersRequest(ms []txn.Marker) (*kmsg.WriteTxnMarkersRequest, map[markerKey]int) {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	type decision struct {
		pid     int64
		epoch   int16
		commit  bool
		coEpoch int32
	}
	entries := map[decision]int{}
	index := map[markerKey]int{}
	for i, m := range ms {
		d := decision{m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch}
		e, ok := entries[d]
		if !ok {
			me := kmsg.NewWriteTxnMarkersRequestMarker()
			me.ProducerID, me.ProducerEpoch, me.Committed, me.CoordinatorEpoch = d.pid, d.epoch, d.commit, d.coEpoch
			req.Markers = append(req.Markers, me)
			e = len(req.Markers) - 1
			entries[d] = e
		}
		me := &req.Markers[e]
		t := -1
		for j := range me.Topics {
			if me.Topics[j].Topic == m.Topic {
				t = j
			}
		}
		if t < 0 {
			mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			mt.Topic = m.Topic
			me.Topics = append(me.Topics, mt)
			t = len(me.Topics) - 1
		}
		me.Topics[t].Partitions = append(me.Topics[t].Partitions, m.Partition)
		index[markerKey{m.ProducerID, m.Topic, m.Partition}] = i
	}
	return req, index
}

// markerCodes reads a WriteTxnMarkers answer back into one code per marker; a marker the
// answer does not mention is retried (NOT_LEADER_OR_FOLLOWER).
func markerCodes(resp *kmsg.WriteTxnMarkersResponse, index map[markerKey]int, n int) []int16 {
	codes := make([]int16, n)
	seen := make([]bool, n)
	for _, m := range resp.Markers {
		for _, t := range m.Topics {
			for _, p := range t.Partitions {
				if i, ok := index[markerKey{m.ProducerID, t.Topic, p.Partition}]; ok {
					codes[i], seen[i] = p.ErrorCode, true
				}
			}
		}
	}
	for i := range codes {
		if !seen[i] {
			codes[i] = kerr.NotLeaderForPartition.Code
		}
	}
	return codes
}

// client is the connection to the broker at addr (host is its advertised host, which its
// certificate covers), made on first use.
func (s *markerSender) client(addr, host string) (*kgo.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("marker sender closed")
	}
	if cl, ok := s.clients[addr]; ok {
		return cl, nil
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("paddock-broker-" + strconv.Itoa(int(s.h.Self))),
		kgo.RequestRetries(0)}
	if s.listener.TLS {
		opts = append(opts, kgo.DialTLSConfig(s.tlsConfig(host)))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	s.clients[addr] = cl
	return cl, nil
}

// tlsConfig verifies the leader's certificate against the cluster CAs of the moment (so a
// CA rotation needs no new client) and presents this broker's current certificate.
func (s *markerSender) tlsConfig(host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified in VerifyConnection against the CAs read at each handshake.
		InsecureSkipVerify: true, //nolint:gosec // verified below
		VerifyConnection: func(cs tls.ConnectionState) error {
			if s.security == nil {
				return errors.New("this broker knows no cluster CA")
			}
			sec := s.security.Security()
			if sec.ClusterCAs == nil || len(cs.PeerCertificates) == 0 {
				return errors.New("no cluster CA to verify the leader's certificate")
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: host, Roots: sec.ClusterCAs, Intermediates: inter})
			return err
		},
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if s.security != nil {
				if c := s.security.Security().Certificate; c != nil {
					return c, nil
				}
			}
			return &tls.Certificate{}, nil
		},
	}
}

// Close closes every connection; later calls fail.
func (s *markerSender) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, cl := range s.clients {
		cl.Close()
	}
	s.clients = nil
}
