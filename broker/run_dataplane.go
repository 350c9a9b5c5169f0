package broker

import (
	"context"
	"math"
	"time"

	v1alpha1 "github.com/paddock-dev/paddock/api/v1alpha1"
	"github.com/paddock-dev/paddock/broker/storage"
	"github.com/paddock-dev/paddock/broker/txn"
)

// startPartitions starts the partition manager that follows the view (partitions.go) and
// plugs it and the producer-id source into the Handler, before the first Serve. Without
// --data-dir the broker serves no partition data: every partition answers
// NOT_LEADER_OR_FOLLOWER and InitProducerId a storage error.
// checkMount checks the mount holding the data directory (docs/storage.md, "What the volume
// must provide"): false, with the reasons in MountRefused and logged, when it cannot keep the
// storage rules — an NFS mount older than 4.1, soft, nocto, read-only, an object store. A
// mount table that cannot be read (not Linux) or does not show the directory leaves the
// mount unchecked: logged, and the broker serves.
func (b *Broker) checkMount() bool {
	if b.Config.DataDir == "" {
		return true
	}
	var (
		m        storage.Mount
		refusals []storage.MountRefusal
		err      error
	)
	if b.MountInfo == nil {
		m, refusals, err = storage.ReadDataDirMount(b.Config.DataDir)
	} else {
		var text string
		if text, err = b.MountInfo(); err == nil {
			m, refusals, err = storage.CheckDataDirMount(text, b.Config.DataDir)
		}
	}
	if err != nil {
		b.Log.Info("The data volume's mount was not checked", "dataDir", b.Config.DataDir, "reason", err.Error())
		return true
	}
	if len(refusals) == 0 {
		b.Log.V(1).Info("The data volume's mount keeps the storage rules", "mountPoint", m.MountPoint, "fsType", m.FSType)
		return true
	}
	why := make([]string, len(refusals))
	for i, r := range refusals {
		why[i] = r.String()
	}
	b.mountRefused.Store(&why)
	b.Log.Error(nil, "Refusing to serve: the data volume's mount cannot keep the storage rules", "dataDir", b.Config.DataDir,
		"mountPoint", m.MountPoint, "fsType", m.FSType, "source", m.Source, "refusals", why)
	return false
}

// ioTimeout is Broker.IOTimeout or its default.
func (b *Broker) ioTimeout() time.Duration {
	if b.IOTimeout == 0 {
		return storage.DefaultIOTimeout
	}
	return b.IOTimeout
}

func (b *Broker) startPartitions(r *running) {
	if b.Config.DataDir == "" {
		return
	}
	fsys := b.StorageFS
	if fsys == nil {
		fsys = storage.OSFS{}
	}
	fsys = timedFS{FS: fsys, m: b.metrics}
	p := NewPartitions(PartitionsConfig{
		Self: b.Config.Identity.ID, DataDir: b.Config.DataDir, View: b.View, FS: fsys,
		IOTimeout: b.ioTimeout(), Metrics: b.metrics, Log: b.Log.WithName("partitions"),
	})
	b.partitions.Store(p)
	r.handler.Partitions = p
	r.handler.ProducerIDs = &ProducerIDSource{DataDir: b.Config.DataDir, FS: storage.WatchdogFS(fsys, b.ioTimeout())}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Run(ctx)
	}()
	r.stopPartitions = func() {
		cancel()
		<-done
	}
}

// stopPartitions relinquishes every partition still held (a drain that timed out, or a hard
// stop) and waits until every log is closed. Called once the listeners are closed, so no
// request is still appending.
func (b *Broker) stopPartitions(r *running) {
	if r.stopPartitions == nil {
		return
	}
	if n := b.Leading(); n > 0 {
		b.Log.Info("Relinquishing the partitions still held", "partitions", n)
	}
	r.stopPartitions()
	r.stopPartitions = nil
}

// CaughtUp reports whether the broker has acted on its current view and taken over every
// partition it gives it (Partitions.CaughtUp): what a test waits for after moving a partition.
func (b *Broker) CaughtUp() bool { return b.partitions.Load().CaughtUp() }

// Claims lists the partitions whose fence this broker holds (Partitions.Claims).
func (b *Broker) Claims() []v1alpha1.PartitionClaim { return b.partitions.Load().Claims() }

// Failed lists the partitions whose storage failed here recently (Partitions.Failed).
func (b *Broker) Failed() []v1alpha1.PartitionFailure { return b.partitions.Load().Failed() }

// Uncleanable is the heartbeat's uncleanable-partitions announcement (Partitions.Uncleanable).
func (b *Broker) Uncleanable() []v1alpha1.UncleanablePartition {
	return b.partitions.Load().Uncleanable()
}

// Leading is how many partition logs this broker holds open: taking over, serving or
// relinquishing. Zero means it leads nothing.
func (b *Broker) Leading() int { return b.partitions.Load().Open() }

// selfFenced reports that the broker has not renewed its heartbeat Lease for a whole session
// timeout (counted from the broker's start until the first renewal): the operator has
// probably declared it dead and moved its partitions, so it stops acknowledging appends.
// Without a heartbeat (tests on an in-memory view) it never is.
func (b *Broker) selfFenced() bool {
	hb := b.Heartbeat
	if hb == nil {
		return false
	}
	age := hb.Age()
	if age < 0 {
		age = time.Since(b.started)
	}
	return leaseExpired(age, hb.SessionTimeout)
}

// leaseExpired is the self-fence rule: a Lease last renewed age ago has expired once a whole
// session timeout has passed.
func leaseExpired(age, sessionTimeout time.Duration) bool { return age >= sessionTimeout }

// startGroups starts the group coordinator that follows the view (group_coordinator.go) and
// plugs it into the Handler, before the first Serve. Without --data-dir there is no
// volume for committed offsets: every group request answers COORDINATOR_NOT_AVAILABLE.
func (b *Broker) startGroups(r *running) {
	if b.Config.DataDir == "" {
		return
	}
	fsys := b.StorageFS
	if fsys == nil {
		fsys = storage.OSFS{}
	}
	g := &Groups{
		Self: b.Config.Identity.ID, DataDir: b.Config.DataDir, View: b.View, FS: storage.WatchdogFS(fsys, b.ioTimeout()),
		Metrics: b.groupMetrics, Configure: b.GroupConfig, Log: b.Log.WithName("groups"),
	}
	b.groups = g
	r.handler.Groups = g
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	r.stopGroups = func() {
		cancel()
		<-done
	}
}

// stopGroups closes the group coordinator, once.
func (b *Broker) stopGroups(r *running) {
	if r.stopGroups == nil {
		return
	}
	if n := b.groups.Owned(); n > 0 {
		b.Log.Info("Closing the group coordinator with groups still held", "groups", n)
	}
	r.stopGroups()
	r.stopGroups = nil
}

// CoordinatesGroups is how many groups this broker's coordinator holds (loading, serving or
// unloading): zero once the view gave them all away and their last requests finished.
func (b *Broker) CoordinatesGroups() int { return b.groups.Owned() }

// GroupCounts counts the groups this broker coordinates and serves, by protocol and state:
// what its heartbeat announces (v1alpha1.AnnotationGroups) for the KafkaCluster's status.
func (b *Broker) GroupCounts() []v1alpha1.GroupCount { return b.groups.Counts() }

// startTxns starts the transaction coordinator that follows the view (txn_coordinator.go)
// and its marker sender, and plugs it into the Handler. Without --data-dir every
// transactional request answers COORDINATOR_NOT_AVAILABLE.
func (b *Broker) startTxns(r *running) {
	if b.Config.DataDir == "" {
		return
	}
	fsys := b.StorageFS
	if fsys == nil {
		fsys = storage.OSFS{}
	}
	sender := newMarkerSender(r.handler, b.View, b.Config.Listeners, b.Security, b.Log.WithName("txn-markers"))
	t := &Transactions{
		Self: b.Config.Identity.ID, DataDir: b.Config.DataDir, View: b.View, FS: storage.WatchdogFS(fsys, b.ioTimeout()),
		ProducerIDs: r.handler.ProducerIDs, Markers: sender, Metrics: b.txnMetrics, Configure: b.TxnConfig, Log: b.Log.WithName("txn"),
	}
	r.handler.Txns = t
	b.txns.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		t.Run(ctx)
	}()
	r.stopTxns = func() {
		cancel()
		<-done
		sender.Close()
	}
}

// stopTxns closes the transaction coordinator, once.
func (b *Broker) stopTxns(r *running) {
	if r.stopTxns == nil {
		return
	}
	r.stopTxns()
	r.stopTxns = nil
}

// OngoingTransactions counts the transactions this broker's transaction coordinator holds
// open — Ongoing, or decided (PrepareCommit, PrepareAbort) with markers still to write — for
// its heartbeat and the KafkaCluster's status; 0 before the coordinator runs.
func (b *Broker) OngoingTransactions() int32 {
	c := b.txns.Load().Current()
	if c == nil {
		return 0
	}
	counts := c.StateCounts()
	return int32(min(counts[txn.Ongoing]+counts[txn.PrepareCommit]+counts[txn.PrepareAbort], math.MaxInt32))
}
