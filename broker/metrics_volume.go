package broker

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/paddock-dev/paddock/broker/storage"
)

// The data volume is shared by every broker of the cluster, so each reports the same
// numbers: a dashboard takes the max over a cluster's brokers.
var (
	descVolumeSize = prometheus.NewDesc("paddock_volume_size_bytes",
		"Size of the file system holding --data-dir (statfs).", nil, nil)
	descVolumeFree = prometheus.NewDesc("paddock_volume_available_bytes",
		"Bytes of the file system holding --data-dir that the broker may still write (statfs: blocks available to unprivileged users).", nil, nil)
	descVolumeUsed = prometheus.NewDesc("paddock_volume_used_bytes",
		"Bytes in use on the file system holding --data-dir (statfs: total minus free blocks).", nil, nil)
)

func describeVolume(ch chan<- *prometheus.Desc) {
	ch <- descVolumeSize
	ch <- descVolumeFree
	ch <- descVolumeUsed
}

// collectVolume sends the volume's series; nothing when statfs fails (a missing directory
// before the first write), so no made-up zero reaches a free-space alert.
func collectVolume(ch chan<- prometheus.Metric, dir string) {
	sp, err := storage.VolumeSpace(dir)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(descVolumeSize, prometheus.GaugeValue, float64(sp.Total))
	ch <- prometheus.MustNewConstMetric(descVolumeFree, prometheus.GaugeValue, float64(sp.Usable))
	ch <- prometheus.MustNewConstMetric(descVolumeUsed, prometheus.GaugeValue, float64(sp.Used))
}
